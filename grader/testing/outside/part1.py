"""Part 1 as outside code writes it: the causal mask, the sinusoidal encoding, attention, multi-head attention."""
from .answer import Answer

MASK = [
    Answer("mask", "old_tutorial_fill", "PyTorch's older word-language-model tutorial: a keep-mask turned additive",
           """
def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))
    return mask
""", None),
    Answer("mask", "numpy_triu", "course homework that builds masks in NumPy (np.triu with k=1)", """
import numpy as np
def generate_square_subsequent_mask(sz):
    upper = np.triu(np.ones((sz, sz)), k=1).astype(bool)
    return torch.zeros(sz, sz).masked_fill(torch.from_numpy(upper), float("-inf"))
""", None),
    Answer("mask", "nested_loops", "a learner's first version: two loops over the matrix", """
def generate_square_subsequent_mask(sz):
    mask = torch.zeros(sz, sz)
    for i in range(sz):
        for j in range(i + 1, sz):
            mask[i, j] = float("-inf")
    return mask
""", None),
    Answer("mask", "tril_buffer_fill", "nanoGPT-style: a lower-triangular buffer, blocked where it is 0", """
def generate_square_subsequent_mask(sz):
    keep = torch.tril(torch.ones(sz, sz))
    return torch.zeros(sz, sz).masked_fill(keep == 0, float("-inf"))
""", None),
    Answer("mask", "annotated_subsequent", "The Annotated Transformer's subsequent_mask: a boolean keep-mask with a "
           "batch axis", """
def generate_square_subsequent_mask(sz):
    attn_shape = (1, sz, sz)
    subsequent = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return subsequent == 0
""", "mask.boolean"),
    Answer("mask", "large_negative", "code that avoids -inf for fear of NaN (-1e9, as masked_fill examples use)", """
def generate_square_subsequent_mask(sz):
    return torch.triu(torch.full((sz, sz), -1e9), diagonal=1)
""", "mask.finite_negative"),
    Answer("mask", "ones_times_inf", "a one-liner that multiplies a 0/1 triangle by -inf (0 * -inf is NaN)", """
def generate_square_subsequent_mask(sz):
    return torch.triu(torch.ones(sz, sz), diagonal=1) * float("-inf")
""", "mask.nan"),
    Answer("mask", "keep_triangle", "nanoGPT's registered bias used as the mask itself", """
def generate_square_subsequent_mask(sz):
    return torch.tril(torch.ones(sz, sz)).view(1, 1, sz, sz)
""", "mask.ones"),
    Answer("mask", "full_inf_triu", "triu of a matrix full of -inf, without the offset", """
def generate_square_subsequent_mask(sz):
    return torch.triu(torch.full((sz, sz), float("-inf")))
""", "mask.diagonal_blocked"),
]

ENCODING = [
    Answer("encoding", "annotated_batch_axis", "The Annotated Transformer: the table kept with a batch axis", """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)
""", None),
    Answer("encoding", "numpy_angle_rates", "the TensorFlow tutorial's angle rates, in NumPy, then a tensor", """
import numpy as np
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = np.arange(max_len)[:, np.newaxis]
        i = np.arange(d_model)[np.newaxis, :]
        angle_rates = 1 / np.power(10000, (2 * (i // 2)) / np.float32(d_model))
        angles = pos * angle_rates
        angles[:, 0::2] = np.sin(angles[:, 0::2])
        angles[:, 1::2] = np.cos(angles[:, 1::2])
        self.register_buffer("pe", torch.tensor(angles, dtype=torch.float32))

    def forward(self, x):
        return self.dropout(x + self.pe[: x.shape[1]])
""", None),
    Answer("encoding", "stacked_pairs", "sin and cos stacked on a last axis then flattened (interleaved)", """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2).float() / d_model))
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        self.register_buffer("pe", torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(max_len, d_model))

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)].unsqueeze(0))
""", None),
    Answer("encoding", "blog_double_exponent", "a much-copied blog's loop: 2*i where i already steps by 2", """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        for pos in range(max_len):
            for i in range(0, d_model, 2):
                pe[pos, i] = math.sin(pos / (10000 ** ((2 * i) / d_model)))
                pe[pos, i + 1] = math.cos(pos / (10000 ** ((2 * (i + 1)) / d_model)))
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])
""", "pe.frequencies"),
    Answer("encoding", "sequence_first", "PyTorch's tutorial layout, (max_len, 1, d_model), added along axis 0", """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)
""", "pe.not_batch_first"),
    Answer("encoding", "learned_parameter", "the table wrapped in nn.Parameter (as learned-position code does)", """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.pe = nn.Parameter(pe)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])
""", "pe.trainable"),
    Answer("encoding", "scales_input", "a tutorial's PositionalEncoder that multiplies x by sqrt(d_model) itself", """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.d_model = d_model
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1).float()
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x * math.sqrt(self.d_model)
        return self.dropout(x + self.pe[: x.size(1)])
""", "pe.scales_input"),
]

ATTENTION = [
    Answer("attention", "einsum_ellipsis", "einsum notation over any leading axes, the scale as a power", """
import torch.nn.functional as F
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores + mask
    weights = F.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
""", None),
    Answer("attention", "matmul_fill_inf", "matmul, the blocked keys filled with -inf where the mask has -inf", """
def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = k.size(-1)
    scores = torch.matmul(q, k.transpose(-1, -2)) / d_k ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask == float("-inf"), float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    return torch.matmul(attn, v), attn
""", None),
    Answer("attention", "einsum_three_axes", "einsum written for (batch, seq, d) only, as single-head code has it", """
import torch.nn.functional as F
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("bqd,bkd->bqk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores + mask
    weights = F.softmax(scores, dim=-1)
    return torch.einsum("bqk,bkd->bqd", weights, v), weights
""", "attention.three_axes_only", visible_passes=True),
    Answer("attention", "bmm", "d2l-style torch.bmm (3-D tensors only)", """
def scaled_dot_product_attention(q, k, v, mask=None):
    d = q.shape[-1]
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(mask == float("-inf"), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.bmm(weights, v), weights
""", "attention.three_axes_only", visible_passes=True),
    Answer("attention", "annotated_keep_mask", "The Annotated Transformer's masked_fill(mask == 0, -1e9), which reads "
           "the lab's 0 (allowed) as blocked", """
def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, v), p_attn
""", "attention.mask_as_keep"),
    Answer("attention", "scale_by_length", "the scale read from the wrong axis (the number of queries)", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[1])
    if mask is not None:
        scores = scores + mask
    weights = scores.softmax(-1)
    return weights @ v, weights
""", "attention.scale"),
    Answer("attention", "softmax_dim_1", "softmax(dim=1), right for 2-D score matrices, over the queries in 3-D", """
import torch.nn.functional as F
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(k.size(-1))
    if mask is not None:
        scores += mask
    weights = F.softmax(scores, dim=1)
    return torch.matmul(weights, v), weights
""", "attention.softmax_wrong_axis"),
    Answer("attention", "output_only", "returns the output alone, as F.scaled_dot_product_attention does", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores + mask
    return torch.softmax(scores, dim=-1) @ v
""", "wrong_type"),
    Answer("attention", "mask_multiplied", "the mask multiplied into the scores, as with a 0/1 mask", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores * mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
""", "attention.mask_multiplied"),
]

# the student's own attention from the cell before, which their multi-head answer calls
_OWN_ATTENTION = """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
"""

_HELPER = """
def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores + mask
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn
"""

MULTI_HEAD = [
    Answer("multi_head", "linear_split_permute", "F.linear, split into q, k, v, permute to heads", _OWN_ATTENTION + """
import torch.nn.functional as F
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask=None):
    batch, seq, d_model = x.shape
    head_dim = d_model // num_heads
    q, k, v = F.linear(x, in_proj_weight, in_proj_bias).split(d_model, dim=-1)
    q, k, v = (t.reshape(batch, seq, num_heads, head_dim).permute(0, 2, 1, 3) for t in (q, k, v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    out = out.permute(0, 2, 1, 3).reshape(batch, seq, d_model)
    return F.linear(out, out_proj_weight, out_proj_bias), weights
""", None),
    Answer("multi_head", "annotated_helper", "The Annotated Transformer: a helper named attention, weights chunked",
           _HELPER + """
def scaled_dot_product_attention(q, k, v, mask=None):
    return attention(q, k, v, mask)

def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask=None):
    nbatches = x.size(0)
    d_k = x.size(-1) // num_heads
    w_q, w_k, w_v = in_proj_weight.chunk(3)
    b_q, b_k, b_v = in_proj_bias.chunk(3)
    query, key, value = [
        (x @ w.t() + b).view(nbatches, -1, num_heads, d_k).transpose(1, 2)
        for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v))
    ]
    out, attn = attention(query, key, value, mask=mask)
    out = out.transpose(1, 2).contiguous().view(nbatches, -1, num_heads * d_k)
    return out @ out_proj_weight.t() + out_proj_bias, attn
""", None),
    Answer("multi_head", "loop_over_heads", "a loop over the heads, slices of the projections, concatenated",
           _OWN_ATTENTION + """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask=None):
    d_model = x.size(-1)
    head_dim = d_model // num_heads
    projected = x @ in_proj_weight.T + in_proj_bias
    q, k, v = projected[..., :d_model], projected[..., d_model:2 * d_model], projected[..., 2 * d_model:]
    outputs, maps = [], []
    for h in range(num_heads):
        part = slice(h * head_dim, (h + 1) * head_dim)
        out, weights = scaled_dot_product_attention(q[..., part], k[..., part], v[..., part], mask)
        outputs.append(out)
        maps.append(weights)
    merged = torch.cat(outputs, dim=-1)
    return merged @ out_proj_weight.T + out_proj_bias, torch.stack(maps, dim=1)
""", None),
    Answer("multi_head", "weight_not_transposed", "x @ W without the transpose nn.Linear applies", _OWN_ATTENTION + """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask=None):
    batch, seq, d_model = x.shape
    head_dim = d_model // num_heads
    q, k, v = (x @ in_proj_weight + in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.view(batch, seq, num_heads, head_dim).transpose(1, 2) for t in (q, k, v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(1, 2).reshape(batch, seq, d_model)
    return out @ out_proj_weight + out_proj_bias, weights
""", "mha.weight_not_transposed"),
    Answer("multi_head", "split_by_view", "heads cut with view(batch, heads, seq, d_head), no transpose",
           _OWN_ATTENTION + """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask=None):
    batch, seq, d_model = x.shape
    head_dim = d_model // num_heads
    q, k, v = (x @ in_proj_weight.T + in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.reshape(batch, num_heads, seq, head_dim) for t in (q, k, v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(1, 2).reshape(batch, seq, d_model)
    return out @ out_proj_weight.T + out_proj_bias, weights
""", "mha.split_no_transpose"),
    Answer("multi_head", "inline_scale_d_model", "scores written inline, scaled by the model width", """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask=None):
    batch, seq, d_model = x.shape
    head_dim = d_model // num_heads
    q, k, v = (x @ in_proj_weight.T + in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.view(batch, seq, num_heads, head_dim).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)
    if mask is not None:
        scores = scores + mask
    weights = scores.softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, seq, d_model)
    return out @ out_proj_weight.T + out_proj_bias, weights
""", "mha.scale_by_d_model"),
    Answer("multi_head", "weights_averaged", "weights averaged over the heads, as nn.MultiheadAttention returns them",
           _OWN_ATTENTION + """
def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask=None):
    batch, seq, d_model = x.shape
    head_dim = d_model // num_heads
    q, k, v = (x @ in_proj_weight.T + in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.view(batch, seq, num_heads, head_dim).transpose(1, 2) for t in (q, k, v))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(1, 2).reshape(batch, seq, d_model)
    return out @ out_proj_weight.T + out_proj_bias, weights.mean(dim=1)
""", "mha.weights_averaged"),
]

ANSWERS = [*MASK, *ENCODING, *ATTENTION, *MULTI_HEAD]
