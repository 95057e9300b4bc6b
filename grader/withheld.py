"""What a staged student release holds back: translab's reference implementation of each part's graded answers.

translab carries a reference implementation of nearly every graded answer (the mask, the encoding, the model, the
count, the masking, the weight mapping ...), because later parts build on earlier ones: part 3 pretrains part 2's
model.  A release for parts 1 to N-1 done and part N open (``make student-release UNTIL=N``) ships the reference
code of parts before N, so a student stuck on an earlier part still runs the next, and replaces that of parts N
and after by a stub: the same name and signature, no body, no docstring, and a call raises ``NotReleased``,
which says whose answer it is and when it comes.  No bytecode ships (``__pycache__`` is left out).

``ANSWERS`` lists them by part, as ``module:name`` of translab; ``grader/tests/test_student_release.py`` walks
each stage's release and checks that none of the withheld bodies or docstrings can be read there.
"""
from __future__ import annotations

import ast
from pathlib import Path

LAST_PART = 6
# What each stage holds back.  ``READABLE``: not (yet) held back, because a visible check of the same part runs it
# in the student's kernel as its reference (held back, they need stored outputs instead): part 2's
# TransformerModel, both heads and parameter formula (params.py; the LM head is also stated by the prose); part 6's
# BertEncoder, weight mapping and parameter formula.  Never held back: translab.training.batch_loss, the loss of
# every later part's training loop, whose content check_lm_loss's hint states.
ANSWERS: dict[int, tuple[str, ...]] = {
    1: ("model:generate_square_subsequent_mask", "model:PositionalEncoding", "model:sinusoidal_table",
        "attention:scaled_dot_product_attention", "attention:multi_head_attention"),
    2: ("model:Model",),
    3: ("generation:greedy_generate_ids", "generation:greedy_generate"),
    4: ("training:evaluate_accuracy", "training:predict"),
    5: ("mlm:mask_tokens", "mlm:mlm_loss"),
    6: ("bert:BertClassifier", "bert:mean_pool"),
}
READABLE = {2: ("model:TransformerModel", "model:LanguageModelHead", "model:ClassificationHead", "model:last_token_states",
                "params:term_sizes", "params:encoder_layer_parameters", "params:count_parameters_formula"),
            6: ("bert:BertEncoder", "bert:weight_mapping", "bert:convert_checkpoint", "bert:load_pretrained_weights",
                "bert:count_parameters_formula")}


class StageError(ValueError):
    """A stage that does not exist or a withheld name that translab no longer has."""


def withheld(until: int) -> dict[str, dict[str, int]]:
    """{module: {name: part}} of the answers a release for parts before ``until`` holds back."""
    if not 1 <= until <= LAST_PART + 1:
        raise StageError(f"UNTIL={until}: give the part the students start now, 1 to {LAST_PART} (parts before it "
                         f"ship their reference code), or {LAST_PART + 1} for everything (after the last deadline)")
    held: dict[str, dict[str, int]] = {}
    for part in range(until, LAST_PART + 1):
        for entry in ANSWERS[part]:
            module, name = entry.split(":")
            held.setdefault(module, {})[name] = part
    return held


def stub_source(source: str, names: dict[str, int], module: str) -> str:
    """``source`` with each top-level function or class in ``names`` reduced to its signature and a stub."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    found = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    missing = sorted(set(names) - set(found))
    if missing:
        raise StageError(f"translab/{module}.py has no {', '.join(missing)}: update grader.withheld.ANSWERS")
    for name in sorted(names, key=lambda n: found[n].lineno, reverse=True):
        node, part = found[name], names[name]
        first, last = node.body[0].lineno - 1, node.end_lineno
        if node.body[0].lineno == node.lineno:
            raise StageError(f"translab/{module}.py: {name} is written on one line; give it a body of its own")
        indent = " " * (node.col_offset + 4)
        call = f"raise NotReleased({f'translab.{module}.{name}'!r}, {part})\n"
        if isinstance(node, ast.ClassDef):
            stub = f"{indent}def __init__(self, *args, **kwargs):\n{indent}    {call}"
        else:
            stub = f"{indent}{call}"
        lines[first:last] = [stub]
    text = "".join(lines)
    return _add_import(text, "from .stages import NotReleased\n")


def _add_import(text: str, line: str) -> str:
    """``line`` after the module's docstring and ``from __future__`` imports."""
    tree = ast.parse(text)
    after = 0
    for node in tree.body:
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)) \
                or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno
        else:
            break
    lines = text.splitlines(keepends=True)
    return "".join(lines[:after] + [line] + lines[after:])


def write_library(source: Path, dest: Path, until: int) -> list[str]:
    """Rewrite the copied library in ``dest`` (from ``source``) for the stage; returns what it withheld."""
    held = withheld(until)
    done = []
    for module, names in held.items():
        path = dest / f"{module}.py"
        path.write_text(stub_source((source / f"{module}.py").read_text(encoding="utf-8"), names, module),
                        encoding="utf-8")
        done += [f"translab.{module}.{name}" for name in names]
    return sorted(done)
