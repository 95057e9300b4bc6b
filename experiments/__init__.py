"""The maintainers' research scripts: what produced ``artifacts/`` and ``results/``.

    python -m experiments.pretrain      # the shipped checkpoint (make pretrain)
    python -m experiments.transfer      # the transfer experiment (make experiment)
    python -m experiments.diagnostics   # what the pretrained LM knows of sentiment
    python -m experiments.bert_finetune # part 6's fine-tuning at the student budget, 3 seeds
    python -m experiments.decoding      # greedy against sampling on part 3's prompts (make decoding)
    python -m experiments.bench         # speed of training and grading (make bench)

They import the student library (``translab``) and, for the grading figures, the grader; neither
imports them.  What a notebook needs from a result (a table, a plot) lives in ``translab``.
"""
