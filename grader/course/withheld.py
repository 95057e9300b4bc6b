"""What a student release, week by week, holds back: translab's reference implementation of each part's graded answers.

translab carries a reference implementation of nearly every graded answer (the mask, the encoding, the model, the
count, the masking, the weight mapping ...), because later parts build on earlier ones: part 3 pretrains part 2's
model.  A release for parts 1 to N-1 done and part N open (``make student-release UNTIL=N``) ships the reference
code of parts before N, so a student stuck on an earlier part still runs the next, and replaces that of parts N
and after by a stub: the same name and signature, no body, no docstring, and a call raises ``NotReleased``,
which says whose answer it is and when it comes.  No bytecode ships (``__pycache__`` is left out).

``IMPLEMENTS`` maps each answer cell to translab's implementation (``module:name``), ``HOLDS_ANSWER`` the code
that holds one without being it, ``HELD`` what each part holds back; ``grader/tests/course/test_student_release.py`` walks each stage's release and checks that none of the held
back bodies or docstrings can be read there.  ``make similarity`` compares every answer with translab's own code
of the same task, released or not, so an answer copied from it shows.
"""
from __future__ import annotations

import ast
from pathlib import Path

LAST_PART = 6
# Each answer cell, by task (``<notebook>/<grade_id>``), and translab's implementation of the same thing: what a
# stage holds back, and what ``make similarity`` compares every answer with.
IMPLEMENTS: dict[str, tuple[str, ...]] = {
    "01_mask_and_positional_encoding/mask_answer": ("model:generate_square_subsequent_mask",),
    "01_mask_and_positional_encoding/pe_answer": ("model:PositionalEncoding", "model:sinusoidal_table"),
    "01_mask_and_positional_encoding/attention_answer": ("attention:scaled_dot_product_attention",),
    "01_mask_and_positional_encoding/mha_answer": ("attention:multi_head_attention",),
    "02_model_and_parameters/transformer_answer": ("model:TransformerModel",),
    "02_model_and_parameters/heads_answer": ("model:LanguageModelHead", "model:ClassificationHead",
                                             "model:last_token_states"),
    "02_model_and_parameters/model_answer": ("model:Model",),
    "02_model_and_parameters/count_answer": ("params:term_sizes", "params:encoder_layer_parameters",
                                             "params:count_parameters_formula"),
    "03_pretraining_and_generation/pieces_answer": ("tokens:pieces_to_text",),
    "03_pretraining_and_generation/loss_answer": ("training:batch_loss",),
    "03_pretraining_and_generation/greedy_answer": ("generation:greedy_generate_ids", "generation:greedy_generate"),
    "03_pretraining_and_generation/decoding_answer": ("generation:next_token_probs",),
    "03_pretraining_and_generation/sampling_answer": ("generation:sample_next_token",),
    "04_transfer_experiment/accuracy_answer": ("training:evaluate_accuracy", "training:predict"),
    "04_transfer_experiment/transfer_answer": ("model:build_classifier",),
    "05_masked_language_modeling/masking_answer": ("mlm:mask_tokens",),
    "05_masked_language_modeling/mlm_loss_answer": ("mlm:mlm_loss",),
    "06_transfer_at_scale/bert_base_answer": ("bert:BertEncoder",),
    "06_transfer_at_scale/mapping_answer": ("bert:weight_mapping", "bert:convert_checkpoint",
                                            "bert:load_pretrained_weights"),
    "06_transfer_at_scale/bert_count_answer": ("bert:count_parameters_formula",),
    "06_transfer_at_scale/classifier_answer": ("bert:BertClassifier", "bert:mean_pool"),
}
# The checks of the parts held back judge without translab's answers: part 2's count diagnosis sizes the terms by
# inspecting PyTorch's modules (``translab.params.inspected_sizes``), part 6's mapping check finds each parameter's
# sources by the digests the references store (``translab.checks.part6.source_digests``), check_model and the BERT
# checks replay stored outputs; the notebooks' own code takes the student's answer where it needs one (part 3's
# evaluation their loss, part 4's fine-tuning their accuracy).
ANSWERS: dict[int, tuple[str, ...]] = {
    part: tuple(name for task, names in IMPLEMENTS.items() if int(task[:2]) == part for name in names)
    for part in range(1, LAST_PART + 1)}
# translab's code that is no answer cell's implementation but holds one, by the part whose answer it holds: the
# pieces of multi-head attention, the KV cache's step (a multi-head attention for one token, shown in part 3), and
# the checks' own variants of attention, which the grader runs to store each mistake's output
# (``grader.references``) and no check calls while a student works.  Held back like the answers, left out of
# ``make similarity`` (no answer cell is their task).
HOLDS_ANSWER: dict[str, int] = {
    "attention:split_heads": 1, "attention:merge_heads": 1, "attention:cached_attention_step": 1,
    "checks.part1:_attend": 1, "checks.part1:_mha": 1,
}
HELD: dict[int, tuple[str, ...]] = {
    part: ANSWERS[part] + tuple(entry for entry, holder in HOLDS_ANSWER.items() if holder == part)
    for part in range(1, LAST_PART + 1)}


class StageError(ValueError):
    """A stage that does not exist or a withheld name that translab no longer has."""


def withheld(until: int) -> dict[str, dict[str, int]]:
    """{module: {name: part}} of the answers a release for parts before ``until`` holds back."""
    if not 1 <= until <= LAST_PART + 1:
        raise StageError(f"UNTIL={until}: give the part the students start now, 1 to {LAST_PART} (parts before it "
                         f"ship their reference code), or {LAST_PART + 1} for everything (after the last deadline)")
    held: dict[str, dict[str, int]] = {}
    for part in range(until, LAST_PART + 1):
        for entry in HELD[part]:
            module, name = entry.split(":")
            held.setdefault(module, {})[name] = part
    return held


def definitions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.ClassDef]:
    """A module's top-level functions and classes, by name: the unit ``IMPLEMENTS`` names."""
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def stub_source(source: str, names: dict[str, int], module: str) -> str:
    """``source`` with each top-level function or class in ``names`` reduced to its signature and a stub."""
    lines = source.splitlines(keepends=True)
    found = definitions(ast.parse(source))
    missing = sorted(set(names) - set(found))
    if missing:
        raise StageError(f"translab/{module_file(module)} has no {', '.join(missing)}: update "
                         "grader.course.withheld.IMPLEMENTS or HOLDS_ANSWER")
    for name in sorted(names, key=lambda n: found[n].lineno, reverse=True):
        node, part = found[name], names[name]
        first, last = node.body[0].lineno - 1, node.end_lineno
        if node.body[0].lineno == node.lineno:
            raise StageError(f"translab/{module_file(module)}: {name} is written on one line; give it a body of its own")
        indent = " " * (node.col_offset + 4)
        call = f"raise NotReleased({f'translab.{module}.{name}'!r}, {part})\n"
        marker = f"{name}.__withheld__ = {part}  # translab.stages.withheld\n"
        if isinstance(node, ast.ClassDef):
            stub = f"{indent}def __init__(self, *args, **kwargs):\n{indent}    {call}"
        else:
            stub = f"{indent}{call}"
        lines[first:last] = [stub, "\n\n" + marker]
    text = "".join(lines)
    return _add_import(text, f"from {'.' * (module.count('.') + 1)}stages import NotReleased\n")


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


def module_file(module: str) -> str:
    """The path of translab's ``module`` (``checks.part1``) inside the package: ``checks/part1.py``."""
    return module.replace(".", "/") + ".py"


def write_library(source: Path, dest: Path, until: int) -> None:
    """Rewrite the copied library in ``dest`` (from ``source``) for the stage."""
    for module, names in withheld(until).items():
        (dest / module_file(module)).write_text(stub_source((source / module_file(module)).read_text(
            encoding="utf-8"), names, module), encoding="utf-8")
