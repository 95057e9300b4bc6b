"""Each student's own configuration for the numbers a notebook asks them to state (part 2's parameter counts).

A number passed around a chat group must not earn the points, so each student counts the parameters of a model
of their own: a *variant*, drawn from a short code.  The code is an HMAC of the student's id under a course secret
(``grader.course.variants`` holds the secret and derives it; this module never sees the secret), so a student cannot
compute a classmate's code, and the grader derives the same code from the id nbgrader records: what the notebook
showed, the visible check and the grade all agree, and numbers copied from another student are the counts of
another configuration, which the check says.

The kernel finds its code, in this order: ``TRANSLAB_VARIANT`` (set by the grader in a grading kernel, and by a
JupyterHub that knows the secret), else the code the student saved once with ``use_code``, which the instructor
sends each student (``make variants`` lists them).  Nothing a student is given holds another student's code: a
table in the release, keyed by anything a classmate can compute from an id, would be a lookup of everyone's.

The configurations are disjoint from the worked example of the prose (ntoken=100), from the checks' visible
sizes and from every hidden one: ntoken is 101 to 1999, dim_feedforward equals nhid, nhid is a multiple of 16
from 48 to 256 (``in_pool``; ``tests/test_diagnosis.py`` holds it against the references and probes).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from .contract import CONFIG_ENV, VARIANT_ENV

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base 32: no I, L, O, U to misread
CODE_LENGTH = 10

NTOKEN_RANGE = (101, 1999)
NHID_CHOICES = tuple(range(48, 257, 16))
NLAYERS_CHOICES = (2, 3, 4, 5, 6)
NHEAD_CHOICES = (2, 4, 8)
NCLASSES_CHOICES = (2, 3, 4, 5)
WORKED_EXAMPLE = dict(ntoken=100, nhid=200, nlayers=4, nhead=2, dim_feedforward=200, nclasses=2)


class VariantUnknown(RuntimeError):
    """No code for this kernel: the message says how to get one."""


@dataclass(frozen=True)
class Variant:
    """One student's configuration.  The feed-forward width is nhid, as part 2's ``TransformerModel`` builds it."""
    code: str
    ntoken: int
    nhid: int
    nlayers: int
    nhead: int
    nclasses: int

    @property
    def dim_feedforward(self) -> int:
        return self.nhid

    def config(self, head: str = "lm") -> dict:
        """The configuration as the checks' references store one: ``head`` "lm" or "classifier"."""
        return dict(ntoken=self.ntoken, nhid=self.nhid, nlayers=self.nlayers, nhead=self.nhead,
                    dim_feedforward=self.dim_feedforward, nclasses=None if head == "lm" else self.nclasses)

    def text(self) -> str:
        return (f"ntoken={self.ntoken}, nhid={self.nhid}, nlayers={self.nlayers}, nhead={self.nhead}, "
                f"dim_feedforward={self.dim_feedforward}, and a {self.nclasses}-class head")

    def __str__(self) -> str:
        return f"variant {self.code}: {self.text()}"


def derive_code(secret: bytes, student_id: str) -> str:
    """The code of ``student_id`` under the course secret (only the grader and a hub hold the secret)."""
    digest = hmac.new(secret, f"translab-variant-v1:{student_id}".encode(), hashlib.sha256).digest()
    number = int.from_bytes(digest[:8], "big")
    return "".join(ALPHABET[(number >> (5 * i)) & 31] for i in range(CODE_LENGTH))


def normal_code(code: str) -> str:
    """``code`` as stored (upper case, no dashes or spaces); ValueError, saying why, when it is not a code."""
    text = "".join(str(code).split()).replace("-", "").upper()
    if len(text) != CODE_LENGTH or any(c not in ALPHABET for c in text):
        raise ValueError(f"{code!r} is not a variant code: {CODE_LENGTH} letters and digits, e.g. "
                         f"'{ALPHABET[10:15]}-{ALPHABET[1:6]}' (your instructor gives it)")
    return text


def shown_code(code: str) -> str:
    return f"{code[:5]}-{code[5:]}"


def from_code(code: str) -> Variant:
    """The configuration a code stands for: a pure function, the same in the kernel and in the grader."""
    code = normal_code(code)
    rng = random.Random(int.from_bytes(hashlib.sha256(f"translab-config-v1:{code}".encode()).digest()[:8], "big"))
    nhid = rng.choice(NHID_CHOICES)
    return Variant(code=code, ntoken=rng.randint(*NTOKEN_RANGE), nhid=nhid, nlayers=rng.choice(NLAYERS_CHOICES),
                   nhead=rng.choice([h for h in NHEAD_CHOICES if nhid % h == 0]),
                   nclasses=rng.choice(NCLASSES_CHOICES))


def in_pool(cfg: dict) -> bool:
    """Whether a configuration (the references' form) is one a variant can be."""
    return (NTOKEN_RANGE[0] <= cfg["ntoken"] <= NTOKEN_RANGE[1] and cfg["nhid"] in NHID_CHOICES
            and cfg["dim_feedforward"] == cfg["nhid"] and cfg["nlayers"] in NLAYERS_CHOICES
            and cfg["nhead"] in NHEAD_CHOICES and cfg.get("nclasses") in (None, *NCLASSES_CHOICES))


# ----------------------------------------------------------------- the student's side

def _saved_file() -> Path:
    folder = os.environ.get(CONFIG_ENV) or Path.home() / ".config" / "translab"
    return Path(folder) / "student.json"


def _saved() -> dict:
    try:
        data = json.loads(_saved_file().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save(**fields) -> Path:
    path = _saved_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**_saved(), **fields}), encoding="utf-8")
    return path


def use_code(code: str) -> Variant:
    """Save the variant code your instructor sent you, once for every notebook; returns your variant."""
    _save(code=normal_code(code))
    return mine(show=True)


def resolve() -> tuple[Variant, str]:
    """This kernel's variant and where its code came from; ``VariantUnknown`` saying what to do when none."""
    if os.environ.get(VARIANT_ENV):
        return from_code(os.environ[VARIANT_ENV]), "set by your course's server"
    saved = _saved()
    if saved.get("code"):
        return from_code(saved["code"]), f"the code you saved in {_saved_file()}"
    raise VariantUnknown(
        "translab has no variant code for you, so it cannot show your configuration. Your instructor sends each "
        "student a code of their own; run, once, `variants.use_code(\"XXXXX-XXXXX\")` with yours: it is saved "
        "for every notebook. (On the course's JupyterHub it is set for you.)")


SHOWN = "Your configuration (code "  # how the notebook shows the code; the grader reads it back (grader.course.variants)


def mine(show: bool = False) -> Variant:
    """Your variant (``resolve``); with ``show``, printed with where it came from."""
    variant, source = resolve()
    if show:
        print(f"{SHOWN}{shown_code(variant.code)}, {source}):\n  {variant.text()}")
    return variant
