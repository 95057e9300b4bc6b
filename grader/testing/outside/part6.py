"""Part 6 as outside code writes it: a BERT encoder on nn.TransformerEncoder, the checkpoint's weights mapped into
it, a classifier on top."""
from .answer import Answer

# The student's BertBase the mapping check builds (a right one: the mapping is graded on its own).
RIGHT_BERT_BASE = """
class BertBase(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        d = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, d)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, d)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, d)
        self.embedding_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        layer = nn.TransformerEncoderLayer(d, config.num_attention_heads, config.intermediate_size,
                                           config.hidden_dropout_prob, activation="gelu",
                                           layer_norm_eps=config.layer_norm_eps, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)

    def forward(self, input_ids, padding_mask=None, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = self.dropout(self.embedding_norm(x + self.token_type_embeddings(token_type_ids)))
        return self.encoder(x, src_key_padding_mask=padding_mask)
"""


def _base(layer_arguments: str = 'activation="gelu"', embed: str = "", call: str = "padding_mask",
          extra_init: str = "") -> str:
    """A BertBase in the shape most outside code gives it, with one place changed."""
    embed = embed or ("self.word_embeddings(input_ids) + self.position_embeddings(position_ids)"
                      " + self.token_type_embeddings(token_type_ids)")
    return f"""
class BertBase(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.embedding_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob){extra_init}
        layer = nn.TransformerEncoderLayer(
            d_model=config.hidden_size, nhead=config.num_attention_heads,
            dim_feedforward=config.intermediate_size, dropout=config.hidden_dropout_prob,
            layer_norm_eps=config.layer_norm_eps, batch_first=True, {layer_arguments})
        self.encoder = nn.TransformerEncoder(layer, num_layers=config.num_hidden_layers, enable_nested_tensor=False)

    def forward(self, input_ids, padding_mask=None, token_type_ids=None):
        seq_length = input_ids.size(1)
        position_ids = torch.arange(seq_length, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        embeddings = {embed}
        embeddings = self.dropout(self.embedding_norm(embeddings))
        return self.encoder(embeddings, src_key_padding_mask={call})
"""


BERT_BASE = [
    Answer("bert_base", "keywords_functional_gelu", "keyword arguments, activation=F.gelu (the exact GELU)",
           _base("activation=F.gelu"), None),
    Answer("bert_base", "position_ids_buffer", "Hugging Face's non-persistent position_ids buffer",
           _base(extra_init='\n        self.register_buffer("position_ids", '
                            'torch.arange(config.max_position_embeddings).expand((1, -1)), persistent=False)',
                 embed="self.word_embeddings(input_ids) + self.position_embeddings(self.position_ids[:, :seq_length])"
                       " + self.token_type_embeddings(token_type_ids)"), None),
    Answer("bert_base", "relu_default", "nn.TransformerEncoderLayer's default activation (ReLU) left in place",
           _base('activation="relu"'), "bert.relu"),
    Answer("bert_base", "tanh_gelu", "GPT-2's tanh approximation of GELU",
           _base('activation=lambda t: F.gelu(t, approximate="tanh")'), "bert.tanh_gelu"),
    Answer("bert_base", "pre_ln", "nanoGPT's pre-LN layers (norm_first=True)",
           _base('activation="gelu", norm_first=True'), "bert.pre_ln"),
    Answer("bert_base", "attention_mask_convention", "Hugging Face's attention_mask convention (True = keep) "
           "handed to src_key_padding_mask", _base(call="None if padding_mask is None else ~padding_mask"),
           "bert.padding_inverted"),
    Answer("bert_base", "scaled_like_part_2", "the word embeddings scaled by sqrt(hidden_size), as in part 2",
           _base(embed="self.word_embeddings(input_ids) * math.sqrt(self.config.hidden_size)"
                       " + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)"),
           "bert.scaled"),
]

_LAYER_LOOP = """
    for i in range(config.num_hidden_layers):
        src, dst = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            q, k, v = (checkpoint[f"{src}attention.self.{name}.{kind}"] for name in ("query", "key", "value"))
            state[f"{dst}self_attn.in_proj_{kind}"] = torch.cat(%s, dim=0)
            state[f"{dst}self_attn.out_proj.{kind}"] = checkpoint[f"{src}attention.output.dense.{kind}"]%s
            state[f"{dst}norm1.{kind}"] = checkpoint[f"{src}%s.LayerNorm.{kind}"]
            state[f"{dst}linear1.{kind}"] = checkpoint[f"{src}intermediate.dense.{kind}"]
            state[f"{dst}linear2.{kind}"] = checkpoint[f"{src}output.dense.{kind}"]
            state[f"{dst}norm2.{kind}"] = checkpoint[f"{src}%s.LayerNorm.{kind}"]
    return state
"""

_EMBEDDINGS = """
def convert_checkpoint(checkpoint, config):
    state = {}
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        state[f"{name}.weight"] = checkpoint[f"embeddings.{name}.weight"]
    state["embedding_norm.weight"] = checkpoint["embeddings.LayerNorm.weight"]
    state["embedding_norm.bias"] = checkpoint["embeddings.LayerNorm.bias"]
"""


def _mapping(qkv: str = "[q, k, v]", transpose: str = "", first_norm: str = "attention.output",
             second_norm: str = "output") -> str:
    return _EMBEDDINGS + _LAYER_LOOP % (qkv, transpose, first_norm, second_norm)


WEIGHT_MAPPING = [
    Answer("weight_mapping", "loop_with_cat", "a loop over layers, query/key/value concatenated", _mapping(), None),
    Answer("weight_mapping", "renaming_rules", "renaming rules applied to every key, q/k/v gathered by layer", """
def convert_checkpoint(checkpoint, config):
    rules = [("embeddings.LayerNorm", "embedding_norm"), ("embeddings.", ""), ("encoder.layer.", "encoder.layers."),
             ("attention.output.dense", "self_attn.out_proj"), ("attention.output.LayerNorm", "norm1"),
             ("intermediate.dense", "linear1"), ("output.dense", "linear2"), ("output.LayerNorm", "norm2")]
    state, packed = {}, {}
    for name, tensor in checkpoint.items():
        if ".attention.self." in name:
            layer, _, _, part, kind = name.split(".")[2:]
            packed.setdefault((layer, kind), {})[part] = tensor
            continue
        if name.startswith("pooler.") or name.endswith("position_ids"):
            continue
        for old, new in rules:
            if name.startswith(old) or (old.startswith(("attention", "intermediate", "output")) and old in name):
                name = name.replace(old, new, 1)
        state[name] = tensor
    for (layer, kind), parts in packed.items():
        state[f"encoder.layers.{layer}.self_attn.in_proj_{kind}"] = torch.cat(
            [parts["query"], parts["key"], parts["value"]])
    return state
""", None),
    Answer("weight_mapping", "kqv_order", "key, query, value in the order a checkpoint lists them alphabetically",
           _mapping(qkv="[k, q, v]"), "mapping.qkv_order"),
    Answer("weight_mapping", "transposed_dense", "the TensorFlow port's habit: every dense weight transposed",
           _mapping(transpose='.T if kind == "weight" else checkpoint[f"{src}attention.output.dense.{kind}"]'),
           "mapping.transposed"),
    Answer("weight_mapping", "norms_swapped", "the two LayerNorms of a layer swapped",
           _mapping(first_norm="output", second_norm="attention.output"), "mapping.norms_swapped"),
    Answer("weight_mapping", "cat_on_columns", "query, key and value concatenated along dim=1",
           _mapping(qkv="[q, k, v], dim=-1) if kind == 'weight' else torch.cat([q, k, v]"), "mapping.qkv_axis"),
]

_CLASSIFIER = """
class BertClassifier(nn.Module):
    def __init__(self, encoder, nclasses):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.hidden_size, nclasses)

    def forward(self, input_ids, padding_mask=None, token_type_ids=None):
        hidden = self.encoder(%s)
%s
"""
_ALL = "input_ids, padding_mask, token_type_ids"  # what the encoder is given, in most answers

CLASSIFIER = [
    Answer("classifier", "sentence_transformers_mean", "sentence-transformers' mean pooling with a clamp",
           _CLASSIFIER % (_ALL, """
        if padding_mask is None:
            padding_mask = torch.zeros(input_ids.shape, dtype=torch.bool, device=input_ids.device)
        weights = (~padding_mask).unsqueeze(-1).expand(hidden.size()).float()
        summed = torch.sum(hidden * weights, 1)
        counts = torch.clamp(weights.sum(1), min=1e-9)
        return self.head(summed / counts)"""), None),
    Answer("classifier", "per_sentence_loop", "one sentence at a time: the real rows, their mean",
           _CLASSIFIER % (_ALL, """
        if padding_mask is None:
            return self.head(hidden.mean(dim=1))
        pooled = torch.stack([h[~m].mean(dim=0) for h, m in zip(hidden, padding_mask)])
        return self.head(pooled)"""), None),
    Answer("classifier", "cls_token", "BERT's [CLS] vector, as BertForSequenceClassification reads it",
           _CLASSIFIER % (_ALL, """
        return self.head(hidden[:, 0])"""), "classifier.first_token"),
    Answer("classifier", "plain_mean", "the mean over every position, padding included", _CLASSIFIER % (_ALL, """
        return self.head(hidden.mean(dim=1))"""), "classifier.mean_with_padding"),
    Answer("classifier", "keep_mask_inverted", "padding_mask used as an attention_mask (1 = keep): the padding "
           "averaged", _CLASSIFIER % (_ALL, """
        if padding_mask is None:
            return self.head(hidden.mean(dim=1))
        keep = padding_mask.unsqueeze(-1).float()
        return self.head((hidden * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1))"""),
           "classifier.padding_inverted"),
    Answer("classifier", "softmax_output", "probabilities returned (softmax before the loss)", _CLASSIFIER % (_ALL, """
        if padding_mask is None:
            return F.softmax(self.head(hidden.mean(dim=1)), dim=-1)
        keep = (~padding_mask).unsqueeze(-1).float()
        return F.softmax(self.head((hidden * keep).sum(dim=1) / keep.sum(dim=1)), dim=-1)"""), "output.softmax"),
    Answer("classifier", "no_mask_to_encoder", "the encoder run without the padding mask, the mean right",
           _CLASSIFIER % ("input_ids, token_type_ids=token_type_ids", """
        if padding_mask is None:
            return self.head(hidden.mean(dim=1))
        keep = (~padding_mask).unsqueeze(-1).float()
        return self.head((hidden * keep).sum(dim=1) / keep.sum(dim=1))"""), "classifier.no_padding_mask"),
]

BERT_COUNT = [
    Answer("bert_count", "block_by_block", "a course solution's style: one variable per block", """
def count_bert_parameters(config, pooler=False):
    d, f = config.hidden_size, config.intermediate_size
    word = config.vocab_size * d
    position = config.max_position_embeddings * d
    token_type = config.type_vocab_size * d
    embedding_norm = 2 * d
    qkv = 3 * (d * d + d)
    out = d * d + d
    ffn = d * f + f + f * d + d
    norms = 4 * d
    total = word + position + token_type + embedding_norm + config.num_hidden_layers * (qkv + out + ffn + norms)
    if pooler:
        total += d * d + d
    return total
""", None),
    Answer("bert_count", "linear_helper", "a helper for a Linear's count, as in model-size calculators", """
def count_bert_parameters(config, pooler=False):
    def linear(n_in, n_out):
        return n_in * n_out + n_out
    def norm(n):
        return 2 * n
    d = config.hidden_size
    emb = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + norm(d)
    layer = 4 * linear(d, d) + linear(d, config.intermediate_size) + linear(config.intermediate_size, d) + 2 * norm(d)
    return emb + config.num_hidden_layers * layer + (linear(d, d) if pooler else 0)
""", None),
    Answer("bert_count", "weights_only", "a count of the weight matrices and tables, every bias left out", """
def count_bert_parameters(config, pooler=False):
    d, f = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    layer = 4 * d * d + 2 * d * f + 4 * d
    return embeddings + config.num_hidden_layers * layer + (d * d if pooler else 0)
""", ("bert_count.layer", "bert_count.feed_forward_width", "bert_count.pooler")),
    Answer("bert_count", "sinusoidal_habit", "part 1's habit: no position table, as with sinusoids", """
def count_bert_parameters(config, pooler=False):
    d, f = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.type_vocab_size) * d + 2 * d
    layer = 4 * (d * d + d) + d * f + f + f * d + d + 4 * d
    return embeddings + config.num_hidden_layers * layer + ((d * d + d) if pooler else 0)
""", "bert_count.positions"),
    Answer("bert_count", "part2_width", "part 2's formula reused: the feed-forward as wide as the model", """
def count_bert_parameters(config, pooler=False):
    d = config.hidden_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    attention = 4 * (d * d + d)
    feed_forward = 2 * (d * d) + d + d
    return embeddings + config.num_hidden_layers * (attention + feed_forward + 4 * d) + ((d * d + d) if pooler else 0)
""", "bert_count.feed_forward_width"),
    Answer("bert_count", "per_head_projections", "attention counted head by head, each head with full-size "
           "projections, and the pooler always in", """
def count_bert_parameters(config, pooler=False):
    d, f, h = config.hidden_size, config.intermediate_size, config.num_attention_heads
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    attention = h * 3 * (d * d + d) + (d * d + d)
    layer = attention + (d * f + f) + (f * d + d) + 4 * d
    return embeddings + config.num_hidden_layers * layer + d * d + d
""", ("bert_count.heads", "bert_count.layer", "bert_count.pooler")),
    Answer("bert_count", "one_norm_no_embedding_norm", "one LayerNorm per layer, none after the embeddings", """
def count_bert_parameters(config, pooler=False):
    d, f = config.hidden_size, config.intermediate_size
    tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d
    per_layer = 3 * (d * d + d) + (d * d + d) + (d * f + f) + (f * d + d) + 2 * d
    return tables + config.num_hidden_layers * per_layer + ((d * d + d) if pooler else 0)
""", ("bert_count.layer", "bert_count.embedding_norm")),
    Answer("bert_count", "minilm_numbers", "the checkpoint's own sizes written in: right for all-MiniLM-L6-v2 only", """
def count_bert_parameters(config, pooler=False):
    d, f = 384, 1536
    embeddings = (30522 + 512 + 2) * d + 2 * d
    layer = 4 * (d * d + d) + d * f + f + f * d + d + 4 * d
    return embeddings + 6 * layer + ((d * d + d) if pooler else 0)
""", "bert_count.constant"),
    Answer("bert_count", "position_ids_counted", "every tensor of the checkpoint counted, its position_ids buffer "
           "among them", """
def count_bert_parameters(config, pooler=False):
    d, f = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    embeddings += config.max_position_embeddings  # embeddings.position_ids
    layer = 4 * (d * d + d) + d * f + f + f * d + d + 4 * d
    return embeddings + config.num_hidden_layers * layer + ((d * d + d) if pooler else 0)
""", "bert_count.positions"),
]

ANSWERS = [*BERT_BASE, *WEIGHT_MAPPING, *BERT_COUNT, *CLASSIFIER]
