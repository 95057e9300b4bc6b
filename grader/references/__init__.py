"""Building the reference tensors that the notebooks' test cells compare against (``make references``).

Every file under ``grader/references/`` is computed here from translab's own implementation, on
small, seeded configurations.  Test cells load them (``translab.references.load``) instead of calling
translab at grading time, so a hidden test can forbid translab's implementation (see
``translab.checks.forbid``) and still know the right answer.  "visible" entries are the ones the
student's notebook shows; "hidden" entries use sizes, hyperparameters and seeds the student never
sees, which is why this module, which holds them, is the grader's and not the student library's.

Why one file: one builder per reference, each beside the configurations and seeds it draws; ``build`` and the
staleness test walk them all, and the float64 arithmetic they share (``ExactArithmetic``) is defined once here.  Notebook 06's
builders (a real BERT) are in ``grader.references.bert``.
"""
from __future__ import annotations

import contextlib
import math
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from translab import attention as A, model as M, params as P
from translab.data import EOS_ID, PAD_ID, load_tokenizer, normalize
from translab.paths import GRADER_DIR
from translab.checks import part1, part2, part3, part5
from translab.checks.harness import mistaken_outputs
from translab.references import EXACT, NAMES, Tolerance, tolerance

# notebook 06's builders: BUILDERS below finds them by name, and the tests read BERT_SENTENCES here
from grader.references.bert import (BERT_SENTENCES, build_bert_base, build_bert_classifier, build_bert_mapping,  # noqa: F401
                              build_bert_parameters, state_copy)
from translab.generation import greedy_generate_ids, next_token_probs
from translab.tokens import LEFT_OUT, WORD_START, pieces_to_text
from translab.datasets import Batch
from translab.training import evaluate_accuracy
from translab.mlm import mask_tokens, mlm_loss

MASK_SIZES = {"visible": [5], "hidden": [1, 7, 13]}
PE_CONFIGS = {"visible": [(16, 50)], "hidden": [(6, 11), (48, 100)]}
# (batch shape, T_q, T_k, d, d_v, causal): hidden ones add a head axis, a large d where no scaling saturates the
# softmax, d = 1, and a padding-style mask of -inf columns
ATTENTION_CASES = {"visible": [((2,), 3, 5, 8, 6, False), ((1,), 5, 5, 16, 16, True)],
                   "hidden": [((2, 3), 6, 6, 64, 10, True), ((3,), 4, 7, 1, 2, False), ((2,), 5, 5, 24, 24, "padding")]}
# (batch, seq, d_model, heads, causal)
MHA_CASES = {"visible": [(2, 5, 8, 2, True)], "hidden": [(3, 6, 12, 3, True), (2, 4, 16, 4, False), (1, 5, 6, 1, True)]}
TM_CONFIGS = {"visible": [dict(ntoken=50, nhead=2, nhid=16, nlayers=2)],
              "hidden": [dict(ntoken=37, nhead=4, nhid=24, nlayers=3), dict(ntoken=11, nhead=1, nhid=8, nlayers=1)]}
HEAD_CONFIGS = {"visible": [dict(nhid=16, ntoken=50, nclasses=2)],
                "hidden": [dict(nhid=24, ntoken=37, nclasses=3), dict(nhid=8, ntoken=11, nclasses=5)]}
# hidden: two configurations whose feed-forward width is not nhid, so a formula that writes nhid for
# dim_feedforward (right in the notebook, where they are equal) fails there
PARAM_CONFIGS = {"visible": [dict(ntoken=100, nhid=200, nlayers=4, nhead=2, dim_feedforward=200, nclasses=None),
                             dict(ntoken=100, nhid=200, nlayers=4, nhead=2, dim_feedforward=200, nclasses=2)],
                 "hidden": [dict(ntoken=37, nhid=24, nlayers=3, nhead=4, dim_feedforward=24, nclasses=None),
                            dict(ntoken=37, nhid=24, nlayers=3, nhead=4, dim_feedforward=24, nclasses=3),
                            dict(ntoken=4000, nhid=64, nlayers=2, nhead=8, dim_feedforward=96, nclasses=None),
                            dict(ntoken=11, nhid=8, nlayers=1, nhead=1, dim_feedforward=8, nclasses=5),
                            dict(ntoken=500, nhid=32, nlayers=6, nhead=4, dim_feedforward=80, nclasses=2)]}
LENGTHS = [9, 6, 3]


# ----------------------------------------------------------------- builders

def _padded_batch(ntoken: int, seed: int, lengths=LENGTHS) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(5, ntoken, (len(lengths), max(lengths)), generator=g)
    padding = torch.zeros_like(src, dtype=torch.bool)
    for row, length in enumerate(lengths):
        src[row, length:] = PAD_ID
        padding[row, length:] = True
    return src, padding


def build_mask() -> dict:
    return {split: {str(n): M.generate_square_subsequent_mask(n) for n in sizes}
            for split, sizes in MASK_SIZES.items()}


def build_positional_encoding() -> dict:
    out = {}
    for split, configs in PE_CONFIGS.items():
        out[split] = []
        for i, (d_model, max_len) in enumerate(configs):
            g = torch.Generator().manual_seed(100 + i)
            x = torch.randn(2, max_len // 2, d_model, generator=g)
            out[split].append({"d_model": d_model, "max_len": max_len, "x": x,
                               "table": M.sinusoidal_table(max_len, d_model),
                               "expected": x + M.sinusoidal_table(max_len, d_model)[: x.size(1)]})
    return out


def _attention_mask(kind, batch: tuple, t_q: int, t_k: int, g: torch.Generator):
    if kind is True:
        return M.generate_square_subsequent_mask(t_q)
    if kind == "padding":  # each row of the batch hides its own last keys, as a key padding mask does
        lengths = torch.randint(2, t_k + 1, batch, generator=g)
        hidden = torch.arange(t_k) >= lengths.unsqueeze(-1)
        return torch.zeros(hidden.shape).masked_fill(hidden, float("-inf")).unsqueeze(-2)
    return None


@torch.no_grad()
def build_attention() -> dict:
    out = {}
    for split, cases in ATTENTION_CASES.items():
        out[split] = []
        for i, (batch, t_q, t_k, d, d_v, kind) in enumerate(cases):
            g = torch.Generator().manual_seed(150 + i + (10 if split == "hidden" else 0))
            q, k = torch.randn(*batch, t_q, d, generator=g), torch.randn(*batch, t_k, d, generator=g)
            v = torch.randn(*batch, t_k, d_v, generator=g)
            mask = _attention_mask(kind, batch, t_q, t_k, g)
            expected, weights = A.scaled_dot_product_attention(q, k, v, mask)
            out[split].append({"q": q, "k": k, "v": v, "mask": mask, "expected": expected, "weights": weights,
                               **mistaken_outputs(part1.ATTENTION_MISTAKES, part1.attention_pieces(q, k, v, mask))})
    return out


@torch.no_grad()
def build_multi_head_attention() -> dict:
    out = {}
    for split, cases in MHA_CASES.items():
        out[split] = []
        for i, (batch, seq, d_model, heads, causal) in enumerate(cases):
            torch.manual_seed(170 + i + (10 if split == "hidden" else 0))
            module = nn.MultiheadAttention(d_model, heads, batch_first=True)
            nn.init.normal_(module.in_proj_bias, std=0.1)  # PyTorch starts the biases at 0, where leaving them out
            nn.init.normal_(module.out_proj.bias, std=0.1)  # would pass
            g = torch.Generator().manual_seed(190 + i + (10 if split == "hidden" else 0))
            x = torch.randn(batch, seq, d_model, generator=g)
            mask = M.generate_square_subsequent_mask(seq) if causal else None
            weights_in = dict(in_proj_weight=module.in_proj_weight.detach().clone(),
                              in_proj_bias=module.in_proj_bias.detach().clone(),
                              out_proj_weight=module.out_proj.weight.detach().clone(),
                              out_proj_bias=module.out_proj.bias.detach().clone())
            expected, weights = A.multi_head_attention(x, *weights_in.values(), heads, mask)
            out[split].append({"x": x, "num_heads": heads, "mask": mask, **weights_in, "expected": expected,
                               "weights": weights,
                               **mistaken_outputs(part1.MHA_MISTAKES,
                                                  part1.mha_pieces(x, *weights_in.values(), heads, mask))})
    return out


@torch.no_grad()
def _encoder_variants(base: M.TransformerModel, src, padding, causal) -> dict:
    """The right output and the outputs of the mistakes part 2's check names (``part2.TRANSFORMER_MISTAKES``)."""
    return {"expected": base(src, causal, padding),
            **mistaken_outputs(part2.TRANSFORMER_MISTAKES, part2.transformer_pieces(base, src, padding, causal)),
            "expected_no_masks": base(src)}


def build_transformer() -> dict:
    out = {}
    for split, configs in TM_CONFIGS.items():
        out[split] = []
        for i, cfg in enumerate(configs):
            torch.manual_seed(200 + i)
            base = M.TransformerModel.from_config(M.ModelConfig.pick(cfg, dropout=0.1)).eval()
            src, padding = _padded_batch(cfg["ntoken"], 300 + i)
            causal = M.generate_square_subsequent_mask(src.size(1))
            out[split].append({"config": cfg, "state_dict": state_copy(base), "src": src, "padding": padding,
                               "causal": causal, **_encoder_variants(base, src, padding, causal)})
    return out


@torch.no_grad()
def build_heads() -> dict:
    out = {}
    for split, configs in HEAD_CONFIGS.items():
        out[split] = []
        for i, cfg in enumerate(configs):
            torch.manual_seed(400 + i)
            lm = M.LanguageModelHead(cfg["nhid"], cfg["ntoken"])
            cls = M.ClassificationHead(cfg["nhid"], cfg["nclasses"])
            g = torch.Generator().manual_seed(500 + i)
            hidden = torch.randn(len(LENGTHS), max(LENGTHS), cfg["nhid"], generator=g)
            _, padding = _padded_batch(cfg["ntoken"], 600 + i)
            out[split].append({
                "config": cfg, "lm_state": state_copy(lm), "cls_state": state_copy(cls), "hidden": hidden,
                "padding": padding, "lm_expected": lm(hidden), "cls_expected": cls(hidden, padding),
                **mistaken_outputs(part2.CLASSIFICATION_HEAD_MISTAKES, SimpleNamespace(head=cls, hidden=hidden)),
                "cls_no_padding_mask": cls(hidden, None),
            })
    return out


@torch.no_grad()
def build_model() -> dict:
    out = {}
    for split, configs in TM_CONFIGS.items():
        out[split] = []
        for i, cfg in enumerate(configs):
            torch.manual_seed(700 + i)
            lm = M.build_language_model(M.ModelConfig.pick(cfg, dropout=0.1)).eval()
            src, padding = _padded_batch(cfg["ntoken"], 800 + i)
            case = {
                "config": cfg, "base_state": state_copy(lm.base), "head_state": state_copy(lm.head), "src": src,
                "padding": padding, "causal_expected": lm(src, padding), "bidirectional_expected": lm(src, padding, causal=False),
                "causal_no_padding": lm(src),
            }
            # a classification head, which reads the padding mask: a Model that does not pass it on fails here
            classifier = M.Model(lm.base, M.ClassificationHead(cfg["nhid"], 3)).eval()
            # what the base gives for each call check_model expects (RECORDED_CALLS, the first: causal, padding), for
            # a release that holds the base back (the check's stand-in replays them)
            masks = {"causal": M.generate_square_subsequent_mask(src.size(1)), "none": None}
            case["base_outputs"] = [lm.base(src, masks[mask], padding if given == "padding" else None)
                                    for mask, given in part2.RECORDED_CALLS]
            case["lm_outputs"] = [lm.head(hidden_of_call) for hidden_of_call in case["base_outputs"]]
            hidden = case["base_outputs"][0]
            out[split].append({**case, "cls_state": state_copy(classifier.head), "cls_expected": classifier(src, padding),
                               "cls_padding_not_to_head": classifier.head(hidden, None)})
    return out


PARAMETER_VARIANTS = ("no_biases", "no_layer_norms", "one_layer_norm", "no_out_projection", "attention_times_heads",
                      "no_head", "no_embedding", "trainable_positional_encoding", "one_layer", "qkv_once")


def _variants(cfg: dict) -> dict:
    """The parameter count and its usual wrong versions, by name: the mistakes of ``translab.diagnosis`` applied to
    the terms of ``translab.params`` (the checks diagnose by probing; these stay for the instructor's eyes)."""
    from translab.diagnosis import mistaken_count  # lazy: builds a model on import (0.8 s); checkers import this module
    right = P.count_parameters_formula(*P.split_config(cfg))
    return {"expected": right, **{name: int(round(mistaken_count(cfg, f"count.{name}"))) for name in PARAMETER_VARIANTS}}


def build_parameters() -> dict:
    return {split: [{"config": cfg, **_variants(cfg)} for cfg in configs] for split, configs in PARAM_CONFIGS.items()}


def build_lm_targets() -> dict:
    out = {}
    for split, shape in {"visible": (2, 6), "hidden": (3, 11)}.items():
        g = torch.Generator().manual_seed(900 + len(shape) + shape[1])
        ids = torch.randint(5, 100, shape, generator=g)
        out[split] = {"ids": ids, "inputs": ids[:, :-1].clone(), "targets": ids[:, 1:].clone()}
    return out


def build_lm_loss() -> dict:
    out = {}
    for split, (b, t, v, seed) in {"visible": (2, 5, 7, 1000), "hidden": (3, 8, 13, 1001)}.items():
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(b, t, v, generator=g) * 3
        targets = torch.randint(5, v, (b, t), generator=g)
        targets[0, -2:] = PAD_ID
        targets[-1, -1] = PAD_ID
        flat_logits, flat_targets = logits.reshape(-1, v), targets.reshape(-1)
        out[split] = {
            "logits": logits, "targets": targets,
            "expected": nn.functional.cross_entropy(flat_logits, flat_targets, ignore_index=PAD_ID),
            **mistaken_outputs(part3.LM_LOSS_MISTAKES, SimpleNamespace(logits=flat_logits, targets=flat_targets)),
        }
    return out


@torch.no_grad()
def build_greedy() -> dict:
    out = {}
    for split, (cfg, seed) in {"visible": (dict(ntoken=50, nhid=16, nlayers=2, nhead=2), 1100),
                               "hidden": (dict(ntoken=23, nhid=8, nlayers=1, nhead=2), 1101)}.items():
        torch.manual_seed(seed)
        lm = M.build_language_model(M.ModelConfig.pick(cfg, dropout=0.5))
        # Sharpen the head so greedy decoding does not loop on one token.
        with torch.no_grad():
            lm.head.decoder.weight.mul_(4.0)
        prompts = [[2, 7, 9], [2], [2, 11, 5, 8, 20]]
        cases = []
        for prompt in prompts:
            new = greedy_generate_ids(lm, prompt, max_new_tokens=12, eos_id=-1)
            cases.append({"prompt": prompt, "max_new_tokens": 12, "eos_id": EOS_ID if EOS_ID not in new else -1,
                          "expected": greedy_generate_ids(lm, prompt, 12, EOS_ID if EOS_ID not in new else -1)})
            # The same prompt with an "eos" that the model emits after a few tokens: generation must stop there.
            stop = new[3]
            cases.append({"prompt": prompt, "max_new_tokens": 12, "eos_id": stop,
                          "expected": greedy_generate_ids(lm, prompt, 12, stop)})
        out[split] = {"config": cfg, "state_dict": state_copy(lm), "cases": cases}
    return out


def _filtered(logits: torch.Tensor, temperature: float, top_k, top_p, *, exactly_k: bool = False, tail: bool = False,
              crossing_kept: bool = True, p_first: bool = False) -> torch.Tensor:
    """next_token_probs and its usual mistakes (``translab.checks.part3.DECODING_MISTAKES``), one switch each:
    exactly k tokens kept where some tie, the tail kept by top-p, the crossing token dropped, top-p before top-k."""
    def top_k_filter(scores):
        if top_k is None or top_k >= scores.size(-1):
            return scores
        if exactly_k:
            kept = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, scores.topk(top_k, dim=-1).indices, True)
            return scores.masked_fill(~kept, float("-inf"))
        return scores.masked_fill(scores < scores.topk(top_k, dim=-1).values[..., -1:], float("-inf"))

    def top_p_filter(probs):
        if top_p is None or top_p >= 1.0:
            return probs
        ordered, order = probs.sort(dim=-1, descending=True)
        before = ordered.cumsum(dim=-1) - ordered
        dropped = before >= top_p if crossing_kept else ordered.cumsum(dim=-1) > top_p
        dropped[..., 0] = dropped[..., 0] & tail  # the most likely token always stays (but in the tail's mistake)
        if tail:
            dropped = ~dropped
        drop = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, dropped)
        probs = probs.masked_fill(drop, 0.0)
        return torch.nan_to_num(probs / probs.sum(dim=-1, keepdim=True), nan=0.0)  # a tail that keeps nothing

    scores = logits / temperature
    if p_first:
        return top_k_filter(torch.log(top_p_filter(scores.softmax(dim=-1)))).softmax(dim=-1)
    return top_p_filter(top_k_filter(scores).softmax(dim=-1))


def _decoding_case(kind: str, logits: torch.Tensor, temperature: float, top_k, top_p, seed: int = 0) -> dict:
    variants = {"temperature_after_softmax": _filtered(logits, 1.0, top_k, top_p),
                "temperature_multiplied": _filtered(logits, 1.0 / temperature, top_k, top_p),
                "top_k_ties": _filtered(logits, temperature, top_k, top_p, exactly_k=True),
                "top_p_wrong_side": _filtered(logits, temperature, top_k, top_p, tail=True),
                "top_p_crossing_dropped": _filtered(logits, temperature, top_k, top_p, crossing_kept=False),
                "top_p_before_top_k": _filtered(logits, temperature, top_k, top_p, p_first=True)}
    return {"kind": kind, "logits": logits, "temperature": temperature, "top_k": top_k, "top_p": top_p,
            "seed": seed, "expected": next_token_probs(logits, temperature, top_k, top_p), **variants}


# The notebook's example row (a tie at the second-largest logit, a top-p whose crossing token is the fourth).
DECODING_ROW = [2.0, 1.2, 1.2, 0.5, -0.3, -1.0, 0.1, 0.9]


@torch.no_grad()
def build_decoding() -> dict:
    """next_token_probs on settings that each tell a mistake apart, and the rows whose draws check the sampler."""
    visible = torch.tensor([DECODING_ROW, [0.3, -1.1, 2.4, 0.8, 0.6, -0.2, 1.5, -2.0]])
    g = torch.Generator().manual_seed(1900)
    hidden = torch.randn(2, 3, 13, generator=g) * 1.5
    hidden[..., 5] = hidden.topk(3, dim=-1).values[..., 1]  # a tie with the second-largest logit in every row
    settings = {"visible": [(1.0, None, None), (0.5, None, None), (1.0, 2, None), (1.0, None, 0.7), (0.8, 4, 0.8)],
                "hidden": [(1.7, None, None), (1.0, 2, None), (1.2, None, 0.75), (2.0, 5, 0.7), (1.5, 4, 0.85)]}
    # each stored mistake moves some token's probability by 0.049 or more here, or not at all: 3x what a right
    # sampler's frequencies may stray over its draws (translab.checks.part3.DRAWS)
    sampling = {"visible": [(visible[0], 0.8, 4, 0.8, 1901), (visible[1], 1.5, 3, 0.8, 1902)],
                "hidden": [(hidden[0, 1], 1.5, 6, 0.7, 1903), (hidden[1, 1], 0.7, None, 0.8, 1904)]}
    out = {}
    for split, logits in (("visible", visible), ("hidden", hidden)):
        out[split] = [_decoding_case("probs", logits, *setting) for setting in settings[split]]
        out[split] += [_decoding_case("sampling", row.clone(), t, k, p, seed) for row, t, k, p, seed in sampling[split]]
        for case in out[split]:
            require_a_clear_nucleus(case)
    return out


def require_a_clear_nucleus(case: dict) -> None:
    """Top-p is well defined on a case only where the token that crosses p is not tied with the first one dropped
    (which of two tied tokens a sort puts first is arbitrary) and the most likely token alone stays below p (else
    code that drops the crossing token drops every token, and its NaN is another mistake's)."""
    if case["top_p"] is None:
        return
    scores = case["logits"] / case["temperature"]
    if case["top_k"] is not None:
        scores = scores.masked_fill(scores < scores.topk(case["top_k"], dim=-1).values[..., -1:], float("-inf"))
    ordered = scores.softmax(dim=-1).sort(dim=-1, descending=True).values.reshape(-1, scores.size(-1))
    for row in ordered.double():
        kept = int(((row.cumsum(0) - row) < case["top_p"]).sum())
        if row[0] >= case["top_p"] or (kept < len(row) and abs(float(row[kept - 1] - row[kept])) < 1e-4):
            raise ValueError(f"decoding case {case['temperature'], case['top_k'], case['top_p']}: a tie at the "
                             "top-p crossing, or one token above p; choose other logits or p")


# Sentences whose pieces check pieces_to_text: the visible ones are the notebook's kind; the hidden ones add padding
# and a <mask> in the middle of a sentence.
TOKEN_SENTENCES = {"visible": [("The acting is superb.", 0, None), ("an unbelievably tedious, overlong film!", 2, None)],
                   "hidden": [("quiet, patient and quite beautiful.", 3, None),
                              ("nothing here rings true, least of all the ending.", 0, 4),
                              ("i wanted to like it more than i did.", 1, 2)]}


def _pieces_variants(pieces: list[str]) -> dict[str, str]:
    """pieces_to_text's usual mistakes (``translab.checks.part3.TOKEN_MISTAKES``) on one case."""
    kept = [piece for piece in pieces if piece not in LEFT_OUT]
    return {"marker_kept": "".join(kept).strip(),
            "pieces_as_words": " ".join(piece.replace(WORD_START, "") for piece in kept),
            "leading_space": "".join(kept).replace(WORD_START, " "),
            "specials_kept": "".join(pieces).replace(WORD_START, " ").strip()}


def build_tokenization() -> dict:
    tokenizer = load_tokenizer()
    out = {}
    for split, sentences in TOKEN_SENTENCES.items():
        out[split] = []
        for text, pads, masked in sentences:
            pieces = tokenizer.encode_as_pieces(normalize(text))
            if masked is not None:
                pieces[masked] = "<mask>"
            pieces = ["<s>", *pieces, "</s>", *["<pad>"] * pads]
            out[split].append({"pieces": pieces, "expected": pieces_to_text(pieces), **_pieces_variants(pieces)})
    return out


def _accuracy_case(cfg: dict, seed: int) -> dict:
    torch.manual_seed(seed)
    clf = M.build_classifier(M.ModelConfig.pick(cfg, dropout=0.5), cfg["nclasses"])
    batches = []
    for b in range(3):
        src, padding = _padded_batch(cfg["ntoken"], seed + 10 + b, lengths=[7, 2, 5, 7, 4][: 3 + b])
        labels = torch.randint(0, cfg["nclasses"], (src.size(0),), generator=torch.Generator().manual_seed(seed + b))
        batches.append({"inputs": src, "padding_mask": padding, "targets": labels})
    expected = evaluate_accuracy(clf, [Batch(**b) for b in batches])
    clf.eval()
    with torch.no_grad():
        predictions = torch.cat([clf(b["inputs"]).argmax(-1) for b in batches])
    labels = torch.cat([b["targets"] for b in batches])
    return {"config": cfg, "state_dict": state_copy(clf), "batches": batches, "expected": expected,
            "no_padding_mask": float((predictions == labels).float().mean())}


def build_accuracy() -> dict:
    return {"visible": _accuracy_case(dict(ntoken=50, nhid=16, nlayers=2, nhead=2, nclasses=2), 1200),
            "hidden": _accuracy_case(dict(ntoken=29, nhid=8, nlayers=1, nhead=1, nclasses=3), 1300)}


def build_transfer() -> dict:
    out = {}
    for split, (cfg, nclasses, seed) in {"visible": (dict(ntoken=50, nhid=16, nlayers=2, nhead=2), 2, 1400),
                                         "hidden": (dict(ntoken=31, nhid=24, nlayers=1, nhead=4), 3, 1500)}.items():
        torch.manual_seed(seed)
        lm = M.build_language_model(M.ModelConfig.pick(cfg, dropout=0.1))
        src, padding = _padded_batch(cfg["ntoken"], seed + 1)
        out[split] = {"config": cfg, "nclasses": nclasses, "state_dict": state_copy(lm), "src": src, "padding": padding}
    return out


LENGTHS_HIDDEN_MLM = [12, 6, 2, 4]


@torch.no_grad()
def build_mlm_loss() -> dict:
    out = {}
    # the hidden batch is mostly padding: there a model run without its padding mask is far from the right loss
    for split, (cfg, seed, lengths) in {"visible": (dict(ntoken=60, nhid=16, nlayers=2, nhead=2), 1600, [12, 9, 5, 12]),
                                        "hidden": (dict(ntoken=33, nhid=8, nlayers=1, nhead=2), 1700, LENGTHS_HIDDEN_MLM)
                                        }.items():
        torch.manual_seed(seed)
        lm = M.build_language_model(M.ModelConfig.pick(cfg, dropout=0.1)).eval()
        ids, padding = _padded_batch(cfg["ntoken"], seed + 1, lengths=lengths)
        inputs, labels = mask_tokens(ids, cfg["ntoken"], torch.Generator().manual_seed(seed + 2), 0.3)
        pieces = SimpleNamespace(model=lm, ids=ids, inputs=inputs, labels=labels, padding=padding, ntoken=cfg["ntoken"])
        out[split] = {"config": cfg, "state_dict": state_copy(lm), "inputs": inputs, "labels": labels, "padding": padding,
                      "expected": mlm_loss(lm, inputs, labels, padding),
                      **mistaken_outputs(part5.MLM_LOSS_MISTAKES, pieces)}
    return out


BUILDERS = {name: globals()[f"build_{name}"] for name in NAMES}


class CpuIndependentDraws(TorchDispatchMode):
    """Seeded float32 draws made in float64 and rounded to float32, so that a reference's random inputs and weights
    are the same bits on every CPU.  torch's own float32 ``normal_``, ``uniform_`` and ``randn`` take other
    vector kernels on an AVX2, an AVX-512 and an arm64 CPU and differ in the last bits; its float64 ones compute
    each value alone, and rounding them to float32 hides any last-bit difference."""

    IN_PLACE = ("aten::normal_", "aten::uniform_")
    FACTORIES = ("aten::randn", "aten::rand", "aten::randn_like", "aten::rand_like")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = func._schema.name
        if name in self.IN_PLACE and args[0].dtype == torch.float32:
            wide = torch.empty_like(args[0], dtype=torch.float64)
            func(wide, *args[1:], **kwargs)
            return args[0].copy_(wide)
        if name in self.FACTORIES:
            dtype = kwargs.get("dtype") or (args[0].dtype if name.endswith("_like") else torch.get_default_dtype())
            if dtype == torch.float32:
                return func(*args, **{**kwargs, "dtype": torch.float64}).to(torch.float32)
        return func(*args, **kwargs)


class ExactArithmetic(TorchDispatchMode):
    """Every functional float32 operation computed in float64 and rounded back to float32: what a CPU that adds
    exactly gives, and the same bits on every CPU (a float32 matrix product or softmax depends on the order in
    which the CPU's vector kernels add, which differs between AVX2, AVX-512 and arm64).  A student's float32 answer
    then differs from the reference by its own CPU's rounding only.  Random, in-place and view operations, and
    those that name their own dtype, run as they are (seeded draws, weights loaded in place, explicit casts)."""

    RANDOM = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial", "exponential", "poisson")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        if (schema.is_mutable or any(r.alias_info is not None for r in schema.returns)
                or any(word in schema.name for word in self.RANDOM) or kwargs.get("dtype") is not None
                or not any(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in tree_leaves((args, kwargs)))):
            return func(*args, **kwargs)
        wide = tree_map(lambda t: t.double() if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t,
                        (args, kwargs))
        out = func(*wide[0], **wide[1])
        return tree_map(lambda t: t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else t, out)


def build(name: str, exact: bool = True) -> dict:
    """A reference as committed: seeded draws that are the same on every CPU, and (``exact``) exact arithmetic.
    ``exact=False`` computes in float32 as a student's answer does (``grader.references.margins``)."""
    torch.manual_seed(0)
    with CpuIndependentDraws(), (ExactArithmetic() if exact else contextlib.nullcontext()):
        return BUILDERS[name]()


def tolerance_used(found, reference, tol: Tolerance) -> tuple[float, float]:
    """(largest absolute difference, largest fraction of the tolerance used) between two builds of a reference:
    floats element by element against ``atol + rtol * |reference|``; anything else must be equal (else the
    fraction is infinite).  Equal infinities and NaNs count as equal."""
    if isinstance(found, torch.Tensor) or isinstance(reference, torch.Tensor):
        if not (isinstance(found, torch.Tensor) and isinstance(reference, torch.Tensor)) \
                or found.shape != reference.shape or found.dtype != reference.dtype:
            return math.inf, math.inf
        if not reference.is_floating_point():
            return (0.0, 0.0) if torch.equal(found, reference) else (math.inf, math.inf)
        a, b = found.double(), reference.double()
        same = (a == b) | (a.isnan() & b.isnan())
        diff = torch.where(same, torch.zeros_like(a), (a - b).abs())
        allowed = tol.atol + tol.rtol * b.abs()
        used = torch.where(diff == 0, torch.zeros_like(a), diff / allowed)
        return (float(diff.max()) if diff.numel() else 0.0), (float(used.max()) if used.numel() else 0.0)
    if isinstance(found, float) and isinstance(reference, float):
        return tolerance_used(torch.tensor(found, dtype=torch.float64), torch.tensor(reference, dtype=torch.float64),
                              tol)
    pairs = None
    if isinstance(found, dict) and isinstance(reference, dict) and found.keys() == reference.keys():
        pairs = [(found[k], reference[k]) for k in reference]
    elif isinstance(found, (list, tuple)) and isinstance(reference, (list, tuple)) and len(found) == len(reference):
        pairs = list(zip(found, reference))
    if pairs is not None:
        results = [tolerance_used(x, y, tol) for x, y in pairs]
        return max((r[0] for r in results), default=0.0), max((r[1] for r in results), default=0.0)
    return (0.0, 0.0) if found == reference else (math.inf, math.inf)


def same_within(a, b, tol: Tolerance) -> bool:
    """The same reference, up to the tolerance of its check (integers, booleans, shapes and structure exactly)."""
    return tolerance_used(a, b, tol)[1] <= 1


def write_all(out_dir: Path | None = None) -> list[tuple[str, str]]:
    """Write every reference; a file whose content is unchanged, bit for bit, is left alone (no git churn: a build is
    the same bits on every CPU)."""
    out_dir = Path(out_dir) if out_dir is not None else GRADER_DIR / "references"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = []
    for name in NAMES:
        path = out_dir / f"{name}.pt"
        fresh = build(name)
        if path.exists():
            try:
                if same_within(load_committed(name, out_dir), fresh, EXACT):
                    report.append((name, "unchanged"))
                    continue
            except Exception:  # unreadable: rewrite it
                pass
        torch.save(fresh, path)
        report.append((name, "written"))
    return report


def load_committed(name: str, out_dir: Path | None = None) -> dict:
    out_dir = Path(out_dir) if out_dir is not None else GRADER_DIR / "references"
    return torch.load(out_dir / f"{name}.pt", map_location="cpu", weights_only=True)


def stale(out_dir: Path | None = None, names: tuple[str, ...] | list[str] = NAMES) -> list[str]:
    """Names of the references (of ``names``) that differ from what translab computes now, beyond the tolerance of
    their checks: what another CPU's arithmetic moves stays inside it (``grader.references.margins``)."""
    out_dir = Path(out_dir) if out_dir is not None else GRADER_DIR / "references"
    bad = []
    for name in names:
        path = out_dir / f"{name}.pt"
        if not path.exists() or not same_within(load_committed(name, out_dir), build(name), tolerance(name)):
            bad.append(name)
    return bad
