"""Speed of the lab (``make bench``), into ``results/bench.json``:

    python -m experiments.bench                        # everything (852 s on 2 cores, the last full run)
    python -m experiments.bench --quick --out /tmp/b   # reduced run (what `make test` does)

``throughput``  training: translab's loop against bare PyTorch, fp32 and bf16
``notebooks``   the lab: each solution notebook at the student and grading budgets
``grading``     grading: one submission against its floor, a class, the sandbox's cost, similarity, a hub term
``imports``     what a cold start waits for before grading begins: nbgrader's import, the zygote's
``presses``     the formgrader's Autograde button pressed for each of a class in Chromium, warm grader or not
``tables``      the figures as the tables of the grader's pages (``grader/docs/``)
``cli``         what to measure (``__main__`` runs it)
"""
