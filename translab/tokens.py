"""SentencePiece pieces back into text: what the tokenizer's decode does, written out (part 3's first task)."""
from __future__ import annotations

WORD_START = "\u2581"  # "▁": SentencePiece's mark of a piece that starts a word (a space before it)
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>", "<mask>")  # ids 0-4 of the lab's tokenizer (translab.data)
LEFT_OUT = ("<pad>", "<s>", "</s>", "<mask>")  # what pieces_to_text drops: markers, not text


def pieces_to_text(pieces: list[str]) -> str:
    """The text of ``pieces``: the pieces joined, each word-start mark a space, the markers left out, no space at
    either end (``<unk>`` stays: it stands for text the tokenizer could not spell)."""
    text = "".join(piece for piece in pieces if piece not in LEFT_OUT)
    return text.replace(WORD_START, " ").strip()
