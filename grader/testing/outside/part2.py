"""Part 2 as outside code writes it: the Transformer base (embedding * sqrt(nhid) + positions, then the encoder).

The bases follow PyTorch's word-language-model tutorial (sequence-first layers, the input transposed, only the
causal mask passed), The Annotated Transformer and course homework (batch-first layers, the masks passed by keyword),
and learners' versions that leave out a piece; the skeleton's attribute names and the given lines that convert the
padding mask are kept, as the notebook asks.  Several make two or three mistakes at once."""
from .answer import Answer

# The skeleton's given lines: the padding mask made the causal mask's type.
GIVEN = """
        if src_key_padding_mask is not None and src_mask is not None:
            padding = torch.zeros(src_key_padding_mask.shape, dtype=src_mask.dtype, device=src_mask.device)
            src_key_padding_mask = padding.masked_fill(src_key_padding_mask, float("-inf"))"""


def base(init: str, forward: str, signature: str = "src, src_mask=None, src_key_padding_mask=None") -> str:
    return (f"""
class TransformerModel(nn.Module):
    def __init__(self, ntoken, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.nhid = nhid
        self.encoder = nn.Embedding(ntoken, nhid)
        self.pos_encoder = PositionalEncoding(nhid, dropout)
{init}

    def forward(self, {signature}):{GIVEN}
{forward}
""")


BATCH_FIRST = """        layer = nn.TransformerEncoderLayer(nhid, nhead, dim_feedforward=nhid, dropout=dropout, batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)"""
SEQ_FIRST = """        layers = nn.TransformerEncoderLayer(nhid, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layers, nlayers, enable_nested_tensor=False)"""
SEQ_FIRST_DEFAULTS = """        encoder_layers = nn.TransformerEncoderLayer(nhid, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)"""

BASE = [
    Answer("base", "homework_keywords", "course homework: batch-first layers, both masks by keyword", base(BATCH_FIRST, """
        x = self.encoder(src) * math.sqrt(self.nhid)
        x = self.pos_encoder(x)
        return self.transformer_encoder(x, mask=src_mask, src_key_padding_mask=src_key_padding_mask)"""), None),
    Answer("base", "tutorial_sequence_first", "PyTorch's word-language-model tutorial: sequence-first layers, the "
           "batch transposed around them", base(SEQ_FIRST, """
        x = self.pos_encoder(self.encoder(src) * math.sqrt(self.nhid))
        out = self.transformer_encoder(x.transpose(0, 1), src_mask, src_key_padding_mask)
        return out.transpose(0, 1)"""), None),
    Answer("base", "tensor_sqrt_positional", "a learner's version: torch.sqrt of a tensor, the masks positionally",
           base(BATCH_FIRST, """
        scale = torch.sqrt(torch.tensor(float(self.nhid)))
        embedded = self.encoder(src) * scale
        return self.transformer_encoder(self.pos_encoder(embedded), src_mask, src_key_padding_mask)"""), None),
    Answer("base", "unscaled_embedding", "code after the paper's figure: the embedding straight into the positions",
           base(BATCH_FIRST, """
        x = self.pos_encoder(self.encoder(src))
        return self.transformer_encoder(x, mask=src_mask, src_key_padding_mask=src_key_padding_mask)"""),
           "model.no_scale"),
    Answer("base", "tutorial_as_is", "the tutorial's layers kept as they are, whose TransformerEncoder warns",
           base(SEQ_FIRST_DEFAULTS, """
        x = self.pos_encoder(self.encoder(src) * math.sqrt(self.nhid))
        out = self.transformer_encoder(x.transpose(0, 1), src_mask, src_key_padding_mask)
        return out.transpose(0, 1)"""), "stderr_warning"),
    Answer("base", "tutorial_transposed_first", "the tutorial's forward on our batches: the ids transposed first, "
           "so the positions run along the batch, and only the causal mask passed", base(SEQ_FIRST_DEFAULTS, """
        src = src.t()
        x = self.encoder(src) * math.sqrt(self.nhid)
        x = self.pos_encoder(x)
        return self.transformer_encoder(x, src_mask).transpose(0, 1)"""),
           ("model.positions_batch_axis", "model.no_padding_mask", "stderr_warning")),
    Answer("base", "no_masks", "an encoder-only classifier's forward reused: the encoder called on x alone",
           base(BATCH_FIRST, """
        x = self.pos_encoder(self.encoder(src) * math.sqrt(self.nhid))
        return self.transformer_encoder(x)"""), ("model.no_causal_mask", "model.no_padding_mask")),
    Answer("base", "bare_embedding", "a first draft: the embedding alone, no scale and no positions", base(BATCH_FIRST, """
        return self.transformer_encoder(self.encoder(src), src_mask, src_key_padding_mask)"""),
           ("model.no_scale", "model.no_positions")),
    Answer("base", "masks_required", "a forward whose masks have no defaults", base(BATCH_FIRST, """
        x = self.pos_encoder(self.encoder(src) * math.sqrt(self.nhid))
        return self.transformer_encoder(x, src_mask, src_key_padding_mask)""",
        signature="src, src_mask, src_key_padding_mask"), "model.masks_not_optional"),
    Answer("base", "transposed_into_batch_first", "sequence-first habits on batch-first layers: transposed in and "
           "out, and the scale left out", base(BATCH_FIRST, """
        x = self.pos_encoder(self.encoder(src)).transpose(0, 1)
        return self.transformer_encoder(x, src_mask, src_key_padding_mask).transpose(0, 1)"""),
           ("model.layout", "model.no_scale")),
]



def heads(lm_forward: str, cls_forward: str, lm_init: str = "self.decoder = nn.Linear(nhid, ntoken)",
          cls_init: str = "self.decoder = nn.Linear(nhid, nclasses)") -> str:
    return f"""
class LanguageModelHead(nn.Module):
    def __init__(self, nhid, ntoken):
        super().__init__()
        {lm_init}

    def forward(self, hidden, src_key_padding_mask=None):
{lm_forward}


class ClassificationHead(nn.Module):
    def __init__(self, nhid, nclasses):
        super().__init__()
        {cls_init}

    def forward(self, hidden, src_key_padding_mask=None):
{cls_forward}
"""


LM_RIGHT = "        return self.decoder(hidden)"
GATHER = """        if src_key_padding_mask is None:
            return self.decoder(hidden[:, -1])
        lengths = (~src_key_padding_mask).sum(dim=1)
        return self.decoder(hidden[torch.arange(hidden.size(0)), lengths - 1])"""

HEADS = [
    Answer("heads", "gather_last_real", "course homework: the lengths from the padding mask, one index per sentence",
           heads(LM_RIGHT, GATHER), None),
    Answer("heads", "dropout_then_gather", "Hugging Face's classification heads: a dropout before the decoder, "
           "torch.gather for the last real token", heads(LM_RIGHT, """
        x = self.dropout(hidden)
        if src_key_padding_mask is None:
            return self.decoder(x[:, -1])
        last = (~src_key_padding_mask).long().sum(1) - 1
        index = last.view(-1, 1, 1).expand(-1, 1, x.size(-1))
        return self.decoder(x.gather(1, index).squeeze(1))""",
        cls_init="self.dropout = nn.Dropout(0.1)\n        self.decoder = nn.Linear(nhid, nclasses)"), None),
    Answer("heads", "loop_over_sentences", "a learner's loop over the batch", heads(LM_RIGHT, """
        rows = []
        for b in range(hidden.size(0)):
            n = hidden.size(1) if src_key_padding_mask is None else int((~src_key_padding_mask[b]).sum())
            rows.append(hidden[b, n - 1])
        return self.decoder(torch.stack(rows))"""), None),
    Answer("heads", "cls_position", "BERT's habit: the sentence read at position 0", heads(LM_RIGHT, """
        return self.decoder(hidden[:, 0])"""), "heads.first_position"),
    Answer("heads", "last_position_always", "GPT-2's classification head without its padding lookup", heads(LM_RIGHT, """
        return self.decoder(hidden[:, -1, :])"""), "heads.last_position"),
    Answer("heads", "lengths_not_minus_one", "the lengths used as the index: one past the last real token",
           heads(LM_RIGHT, """
        if src_key_padding_mask is None:
            return self.decoder(hidden[:, -1])
        lengths = (~src_key_padding_mask).sum(dim=1).clamp(max=hidden.size(1) - 1)
        return self.decoder(hidden[torch.arange(hidden.size(0)), lengths])"""), "heads.off_by_one"),
    Answer("heads", "softmax_and_mean", "probabilities out of both heads, the classifier averaging every position",
           heads("        return torch.softmax(self.decoder(hidden), dim=-1)", """
        return torch.softmax(self.decoder(hidden.mean(dim=1)), dim=-1)"""),
           ("heads.lm_softmax", "heads.cls_softmax", "heads.mean")),
    Answer("heads", "log_softmax_first_token", "NLLLoss habits (log-softmax in the LM head) and [CLS] pooling",
           heads("        return nn.functional.log_softmax(self.decoder(hidden), dim=-1)", """
        return self.decoder(hidden[:, 0])"""), ("heads.lm_softmax", "heads.first_position")),
    Answer("heads", "mean_of_real_no_default", "sentence-transformers' mean pooling, which needs the mask",
           heads(LM_RIGHT, """
        keep = (~src_key_padding_mask).unsqueeze(-1).float()
        return self.decoder((hidden * keep).sum(1) / keep.sum(1))"""), ("heads.mean_real", "heads.no_padding_mask_default")),
]

ANSWERS = [*BASE, *HEADS]
