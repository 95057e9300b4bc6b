"""The properties of part 6's parameter count, each measured by changing one size of a configuration of our own and
reading how much the student's count changes: a row per vocabulary entry, per position, per token type; a layer's
parameters, term by term; the feed-forward's width; nothing per head; the pooler.  Every term that is off is named
from what was measured, never from a guess."""
from __future__ import annotations

import itertools
from dataclasses import replace

from .harness import as_number, call_student, forbid
from .properties import Probe

PROBE_D = 24  # the probes' hidden size
# What a per-entry count measured off by (found - d) shows, where the measurement names its cause.
WHY = {("max_position_embeddings", -PROBE_D): "BERT learns its positions: a table of max_position_embeddings x "
                                             "hidden_size parameters (part 1's sinusoids had none)",
       ("max_position_embeddings", 1): "embeddings.position_ids is counted: a constant buffer of the checkpoint "
                                       "(0 .. max_position_embeddings - 1), not a parameter",
       ("type_vocab_size", -PROBE_D): "the token-type table (type_vocab_size x hidden_size) is missing",
       ("vocab_size", -PROBE_D): "the word embeddings (vocab_size x hidden_size) are missing"}

# A configuration of our own (not a hidden one): sizes whose terms cannot be mistaken for one another.
PROBE_SHAPE = dict(vocab_size=101, hidden_size=PROBE_D, num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
                   max_position_embeddings=33, type_vocab_size=2)


# What a layer's count may leave out (or hold twice), as a function of the hidden size d and the feed-forward width f.
LAYER_PIECES = {  # name: (its size, the key a finding of it carries)
    "every bias of the layer (3d + d + f + d)": (lambda d, f: 5 * d + f, "bert_count.layer"),
    "the two LayerNorms (4d)": (lambda d, f: 4 * d, "bert_count.layer"),
    "one of the two LayerNorms (2d)": (lambda d, f: 2 * d, "bert_count.layer"),
    "the attention's output projection (d^2 + d)": (lambda d, f: d * d + d, "bert_count.layer"),
    "two of the query, key and value projections (2d^2 + 2d)": (lambda d, f: 2 * d * d + 2 * d, "bert_count.layer"),
    "the feed-forward's biases (f + d)": (lambda d, f: f + d, "bert_count.layer"),
    "one of the feed-forward's Linears (d*f + f)": (lambda d, f: d * f + f, "bert_count.layer"),
    "what a feed-forward of width intermediate_size holds beyond one of width hidden_size":
        (lambda d, f: (2 * d * f + f + d) - (2 * d * d + 2 * d), "bert_count.feed_forward_width"),
}
LAYER_SHAPES = ((24, 40), (28, 40), (24, 52), (32, 44))  # (hidden_size, intermediate_size) the layer is counted at


def layer_reading(missing: list[int]) -> tuple[str, str] | None:
    """(the piece, or the two pieces, whose sizes at ``LAYER_SHAPES`` are exactly ``missing``; its key)."""
    sizes = {name: ([piece(d, f) for d, f in LAYER_SHAPES], key) for name, (piece, key) in LAYER_PIECES.items()}
    for name, (values, key) in sizes.items():
        if values == missing:
            return name, key
    for (one, (first, _)), (two, (second, _)) in itertools.combinations(sizes.items(), 2):
        if [a + b for a, b in zip(first, second)] == missing:
            return f"{one} and {two}", "bert_count.layer"
    return None


class CountProbes:
    """The student's count at the check's own configurations (each counted once), and one measure per property."""

    def __init__(self, count_bert_parameters, bert):
        self.answer, self.bert = count_bert_parameters, bert
        self.shape = bert.BertConfig(**PROBE_SHAPE)
        self.d, self.f, self.layers = self.shape.hidden_size, self.shape.intermediate_size, self.shape.num_hidden_layers
        self.counted: dict[str, int] = {}

    def count(self, config, pooler: bool = False) -> int:
        if repr((config, pooler)) not in self.counted:
            with forbid(self.bert.count_parameters_formula):
                found = call_student("count_bert_parameters on a configuration of the check's own", self.answer,
                                     config, pooler=pooler)
            self.counted[repr((config, pooler))] = as_number(found, "count_bert_parameters", whole=True)
        return self.counted[repr((config, pooler))]

    def change(self, name: str, to: int) -> int:
        return self.count(replace(self.shape, **{name: to})) - self.count(self.shape)

    def constant(self):
        sizes = ("vocab_size", "max_position_embeddings", "type_vocab_size", "num_hidden_layers", "intermediate_size",
                 "hidden_size")
        if all(self.change(name, getattr(self.shape, name) + 1) == 0 for name in sizes):
            return ("the count is the same whatever the configuration: one more of any size (vocab_size, hidden_size, "
                    "num_hidden_layers, intermediate_size, max_position_embeddings, type_vocab_size) adds 0.\n"
                    "  likely:   a formula reads every size from config, not the numbers of one checkpoint")
        return None

    def per_entry(self, name: str, what: str):
        d, before = self.d, getattr(self.shape, name)
        found = self.change(name, before + 1)
        if found == d:
            return None
        why = WHY.get((name, found - d))
        return (f"one more {what} should add one row of hidden_size (d = {d}) to the count; it adds {found:,} "
                f"(measured between {name}={before} and {before + 1})." + (f"\n  likely:   {why}" if why else ""))

    def width(self):
        d, f, layers = self.d, self.f, self.layers
        found, right = self.change("intermediate_size", f + 1), layers * (2 * d + 1)
        if found == right:
            return None
        cause = (" (d*2 per layer: the feed-forward's first bias, f, is missing)" if found == layers * 2 * d else
                 " (nothing: the feed-forward is counted with another width than intermediate_size)" if found == 0
                 else "")
        return (f"one more unit of intermediate_size should add {right:,} (2d + 1 per layer: a weight column in, a "
                f"weight row out, a bias); it adds {found:,}{cause}.")

    def layer(self):
        if self.change("intermediate_size", self.f + 1) == 0:
            return None  # the width the count uses is not intermediate_size: the layer's terms cannot be read apart
        layers = self.layers

        def one_layer(d, f):
            sized = replace(self.shape, hidden_size=d, intermediate_size=f)
            return self.count(replace(sized, num_hidden_layers=layers + 1)) - self.count(sized)
        found = [one_layer(d, f) for d, f in LAYER_SHAPES]
        right = [4 * (d * d + d) + (d * f + f) + (f * d + d) + 4 * d for d, f in LAYER_SHAPES]
        if found == right:
            return None
        missing = [r - x for r, x in zip(right, found)]
        at_d, at_f = LAYER_SHAPES[0]
        what = (f"one more layer adds {found[0]:,} to the count where a layer holds {right[0]:,} (measured between "
                f"num_hidden_layers={layers} and {layers + 1}, at hidden_size={at_d}, intermediate_size={at_f})")
        reading = layer_reading(missing) if all(m > 0 for m in missing) else \
            layer_reading([-m for m in missing]) if all(m < 0 for m in missing) else None
        if reading:
            side = "leaves out" if missing[0] > 0 else "counts twice"
            return f"{what}: at every size we tried, the layer's count {side} exactly {reading[0]}.", reading[1]
        return what + "."

    def heads(self):
        heads = self.shape.num_attention_heads
        found = self.change("num_attention_heads", heads // 2)
        if found == 0:
            return None
        return (f"the count changes by {found:+,} when num_attention_heads goes from {heads} to {heads // 2}: the "
                "heads split hidden_size into slices, the projections stay hidden_size x hidden_size, so the count "
                "does not depend on the heads.")

    def pooler(self):
        d = self.d
        found, right = self.count(self.shape, pooler=True) - self.count(self.shape), d * d + d
        if found == right:
            return None
        why = {0: "the pooler is counted when pooler=False, or never: it is added only when pooler=True",
               -right: "the pooler is counted when pooler=False and left out when pooler=True",
               d * d: "the pooler's bias (hidden_size) is missing"}.get(found)
        return (f"pooler=True should add one Linear of hidden_size x hidden_size and its bias ({right:,}); it adds "
                f"{found:,}." + (f"\n  likely:   {why}" if why else ""))

    def embedding_norm(self):
        d, shape = self.d, self.shape
        entries = {name: self.change(name, getattr(shape, name) + 1)
                   for name in ("vocab_size", "max_position_embeddings", "type_vocab_size")}
        rest = self.count(shape) - sum(entries[name] * getattr(shape, name) for name in entries) \
            - self.layers * self.change("num_hidden_layers", self.layers + 1)
        if rest in (2 * d, 2 * d + d * d + d):  # with the pooler always counted: said by the pooler's probe
            return None
        return (f"what your count holds besides its per-entry and per-layer parts is {rest:,}; the embedding "
                f"LayerNorm is a weight and a bias of hidden_size, 2d = {2 * d} (measured at our configuration).")


def bert_count_probes(count_bert_parameters, bert) -> list[Probe]:
    """The properties, the count's use of the sizes first: a constant count hears of that alone."""
    measures = CountProbes(count_bert_parameters, bert)

    def unless_constant(measure):
        return lambda: None if measures.constant() else measure()

    probes = [("bert_count.vocabulary", "one more vocabulary entry", lambda: measures.per_entry("vocab_size",
                                                                                                "vocabulary entry")),
              ("bert_count.positions", "one more position", lambda: measures.per_entry("max_position_embeddings",
                                                                                       "position")),
              ("bert_count.token_types", "one more token type", lambda: measures.per_entry("type_vocab_size",
                                                                                           "token type")),
              ("bert_count.feed_forward_width", "a wider feed-forward", measures.width),
              ("bert_count.layer", "one more layer", measures.layer),
              ("bert_count.heads", "fewer heads", measures.heads),
              ("bert_count.pooler", "pooler=True", measures.pooler),
              ("bert_count.embedding_norm", "the count's constant part", measures.embedding_norm)]
    return [Probe("bert_count.constant", "configurations of other sizes", measures.constant),
            *(Probe(key, kind, unless_constant(measure)) for key, kind, measure in probes)]
