"""How far a student's right answer may land from each reference on another CPU, against its check's tolerance.

A reference is built once, in exact arithmetic (``grader.references.ExactArithmetic``: each float32 operation
computed in float64 and rounded), so it is the same bits on every machine.  A student's answer is computed in
float32 on the student's or the grading server's CPU, and the order in which MKL, oneDNN and ATen's vector kernels
add numbers up differs between CPUs (AVX-512 or AVX2, x86 or arm64).  No machine can run another's CPU, but it can
run the code paths that CPU would take: ATen's AVX2 and scalar kernels (``ATEN_CPU_CAPABILITY``), MKL's and
oneDNN's AVX2 and SSE kernels (``MKL_ENABLE_INSTRUCTIONS``, ``ONEDNN_MAX_CPU_ISA``), one thread instead of two,
oneDNN off.  Each reference is computed in float32 on every path and compared with the exact build at the tolerance
its check uses (``translab.references.TOLERANCES``); the margin is how many times over the largest difference fits in
the tolerance.  The committed file is compared with this machine's exact build too (what ``stale`` sees).

Integer references that come from an argmax (greedy tokens, accuracy) do not move until a near-tie flips: for those
the margin is the smallest gap between the chosen logit and the runner-up, over twice the largest change of a logit
between a path and exact arithmetic (a flip needs the two to move toward each other).  The other way round, a known
mistake must stay well outside the tolerance (``nearest_mistake``), so that no CPU lets it pass.

``python -m grader references --margins`` writes the table to results/reference_margins.json; the test suite
recomputes it and asks for 10x everywhere (grader/tests/references/test_references.py).
"""
from __future__ import annotations

import contextlib
import math
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from translab import model as M
from translab.checks import part1, part2, part3, part4, part5, part6
from translab.paths import GRADER_DIR
from translab.references import NAMES, tolerance

from grader import references as R

REQUIRED_MARGIN = 10.0


# ----------------------------------------------------------------- code paths in this process

@contextlib.contextmanager
def _threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def _onednn_off():
    """oneDNN off alone (``torch.backends.mkldnn.flags`` also sets TF32 and warns that this build has no GPU)."""
    before = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = before


IN_PROCESS = {
    "one thread": lambda: _threads(1),
    "oneDNN off": _onednn_off,
}


def other_cpus() -> dict[str, dict[str, str]]:
    """Environments that make torch take the kernels of another CPU (run in a subprocess: they are read once, at
    import).  On arm64 only ATen's scalar kernels can be chosen; MKL is x86's."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        return {"AVX2 CPU": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                             "ONEDNN_MAX_CPU_ISA": "AVX2"},
                "no-AVX CPU": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                               "ONEDNN_MAX_CPU_ISA": "SSE41"}}
    return {"scalar kernels": {"ATEN_CPU_CAPABILITY": "default"}}


# ----------------------------------------------------------------- what is measured on a path

@torch.no_grad()
def decisions(name: str, built: dict) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """The logits behind an integer reference's argmax decisions and the class each decision chose, one row per
    decision, in groups of one model and one input (both splits), or None for a reference with no argmax in it.

    greedy: the model re-run on the prompt and its stored continuation (the check's model is translab's, loaded
    with the stored weights); each new token was the argmax at the position before it, and a continuation that
    stopped early stopped because the next argmax was eos.  accuracy: each sentence's prediction, with and
    without the padding mask (both are compared)."""
    rows, chosen = [], []
    if name == "greedy":
        for split in built.values():
            lm = M.build_language_model(M.ModelConfig.pick(split["config"], dropout=0.5))
            lm.load_state_dict(split["state_dict"])
            lm.eval()
            for case in split["cases"]:
                prompt, new = list(case["prompt"]), list(case["expected"])
                steps = new + ([case["eos_id"]] if len(new) < case["max_new_tokens"] else [])
                logits = lm(torch.tensor([prompt + new]))[0]
                start = len(prompt) - 1
                rows.append(logits[start:start + len(steps)])
                chosen.append(torch.tensor(steps))
    elif name == "accuracy":
        for case in built.values():
            clf = part4.reference_classifier(case).eval()  # the check's own model
            for batch in case["batches"]:
                for padding in (batch["padding_mask"], None):
                    logits = clf(batch["inputs"], padding)
                    rows.append(logits)
                    chosen.append(logits.argmax(-1))
    else:
        return None
    return list(zip(rows, chosen))


def measure_path(folder: Path, exact: bool = False) -> dict:
    """Every reference built on the current path (in float32, as a student's answer; or ``exact``), and the
    decision logits of the committed ones."""
    out = {"built": {name: R.build(name, exact=exact) for name in NAMES}, "decisions": {}}
    with R.ExactArithmetic() if exact else contextlib.nullcontext():
        for name in NAMES:
            found = decisions(name, R.load_committed(name, folder))
            if found is not None:
                out["decisions"][name] = found
    return out


def _worker(folder: str, destination: str) -> None:
    torch.save(measure_path(Path(folder)), destination)


def _in_subprocess(env: dict[str, str], folder: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        destination = Path(tmp) / "path.pt"
        run = subprocess.run([sys.executable, "-m", "grader.references.margins", str(folder), str(destination)],
                             env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError(f"building the references with {env} failed:\n{run.stderr[-3000:]}")
        return torch.load(destination, map_location="cpu", weights_only=True)


# ----------------------------------------------------------------- comparing

def _decision_margin(baseline: list, others: list[list]) -> dict:
    """A gap of 0 or less means the stored decision is not (or not alone) the argmax even here."""
    gaps, moved = [], 0.0
    for i, (logits, chosen) in enumerate(baseline):
        top = logits.gather(1, chosen[:, None])[:, 0]
        runner_up = logits.scatter(1, chosen[:, None], -math.inf).max(1).values
        gaps.append(float((top - runner_up).min()))
        moved = max([moved, *(float((other[i][0] - logits).abs().max()) for other in others)])
    gap = min(gaps)
    margin = -math.inf if gap <= 0 else math.inf if moved == 0 else gap / (2 * moved)
    return {"decisions": sum(int(chosen.numel()) for _, chosen in baseline), "smallest_gap": gap,
            "largest_logit_change": moved, "margin": margin}


# Each reference's known mistakes, stored beside its right answer: (the check's mistakes, the right answer's key).
def _mistakes() -> dict[str, tuple[dict, str]]:
    return {"attention": (part1.ATTENTION_MISTAKES, "expected"), "multi_head_attention": (part1.MHA_MISTAKES, "expected"),
            "transformer": (part2.TRANSFORMER_MISTAKES, "expected"),
            "heads": (part2.CLASSIFICATION_HEAD_MISTAKES, "cls_expected"),
            "lm_loss": (part3.LM_LOSS_MISTAKES, "expected"), "decoding": (part3.DECODING_MISTAKES, "expected"),
            "mlm_loss": (part5.MLM_LOSS_MISTAKES, "expected"),
            "bert_base": (part6.BERT_BASE_MISTAKES, "expected"), "bert_classifier": (part6.BERT_POOLING_MISTAKES, "expected")}


def _cases(reference: dict) -> list[dict]:
    return [case for split in reference.values() for case in (split if isinstance(split, list) else [split])]


def nearest_mistake(name: str, reference: dict) -> dict | None:
    """The stored mistake closest to the right answer, in fractions of the tolerance, among those that change the
    answer at all (a mistake with no effect on a case, such as ignoring token types where there is one type, is
    0 there and skipped by the checks too)."""
    if name not in _mistakes():
        return None
    mistakes, key = _mistakes()[name]
    distances = [(R.tolerance_used(case[mistake], case[key], tolerance(name))[1], mistake)
                 for case in _cases(reference) for mistake in mistakes if mistake in case]
    found = [(d, mistake) for d, mistake in distances if d > 1 / REQUIRED_MARGIN]
    distance, mistake = min(found) if found else (math.inf, None)
    return {"mistake": mistake, "tolerance_used": distance}


def margins(folder: Path | None = None) -> dict:
    """The margin table.  Per reference: its tolerance; each path's largest difference from exact arithmetic and
    the fraction of the tolerance it uses; the committed file against this machine's exact build; the margin,
    1 / the largest fraction; for argmax references, the decision margin; the nearest known mistake."""
    folder = Path(folder) if folder is not None else GRADER_DIR / "references"
    exact = measure_path(folder, exact=True)
    builds = {"this machine": measure_path(folder)}
    for label, context in IN_PROCESS.items():
        with context():
            builds[label] = measure_path(folder)
    for label, env in other_cpus().items():
        builds[label] = _in_subprocess(env, folder)
    table = {}
    for name in NAMES:
        tol = tolerance(name)
        reference = exact["built"][name]
        rows = {label: R.tolerance_used(path["built"][name], reference, tol) for label, path in builds.items()}
        rows["committed file"] = R.tolerance_used(R.load_committed(name, folder), reference, tol)
        worst = max(used for _, used in rows.values())
        entry = {"tolerance": {"atol": tol.atol, "rtol": tol.rtol},
                 "paths": {label: {"largest_difference": diff, "tolerance_used": used}
                           for label, (diff, used) in rows.items()},
                 "margin": math.inf if worst == 0 else 1 / worst}
        if name in exact["decisions"]:
            entry["decision"] = _decision_margin(exact["decisions"][name],
                                                 [path["decisions"][name] for path in builds.values()])
        mistake = nearest_mistake(name, reference)
        if mistake is not None:
            entry["nearest_mistake"] = mistake
        table[name] = entry
    return table


def machine() -> dict:
    """What this machine's CPU is (for the table's reader; the margins themselves must not depend on it)."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "machine": platform.machine(), "aten_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(), "torch": torch.__version__}


def _figure(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3g}"


def render(table: dict) -> str:
    """The table as the maintainer reads it: each reference's worst path against its tolerance."""
    lines = [f"{'reference':20s} {'atol':>7s} {'rtol':>7s} {'largest difference':>19s}  {'on':15s} {'margin':>8s}  "
             "nearest mistake"]
    for name, entry in table.items():
        tol = entry["tolerance"]
        label, worst = max(entry["paths"].items(), key=lambda item: item[1]["tolerance_used"])
        mistake = entry.get("nearest_mistake")
        lines.append(f"{name:20s} {tol['atol']:>7g} {tol['rtol']:>7g} {_figure(worst['largest_difference']):>19s}  "
                     f"{label if worst['tolerance_used'] else '-':15s} {_figure(entry['margin']):>8s}  "
                     + (f"{mistake['mistake']}, {_figure(mistake['tolerance_used'])}x the tolerance" if mistake else ""))
        if "decision" in entry:
            d = entry["decision"]
            lines.append(f"{'':20s} {d['decisions']} argmax decisions: smallest logit gap {_figure(d['smallest_gap'])}, "
                         f"largest logit change {_figure(d['largest_logit_change'])}, margin {_figure(d['margin'])}")
    return "\n".join(lines)


def write_table(destination: Path) -> str:
    """Measure, write the table with the machine it was measured on, and return it rendered.  An infinite margin
    (nothing moved) is written as the string "inf", which JSON has no number for."""
    import json
    table = margins()
    plain = json.loads(json.dumps(table), parse_constant={"Infinity": "inf", "-Infinity": "-inf", "NaN": "nan"}.get)
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(json.dumps({"measured_on": machine(), "required_margin": REQUIRED_MARGIN,
                                       "references": plain}, indent=1) + "\n")
    return render(table) + f"\nwritten to {destination}"


if __name__ == "__main__":
    _worker(*sys.argv[1:3])
