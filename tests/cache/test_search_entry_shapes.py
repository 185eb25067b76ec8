"""A search cache entry of the wrong shape heals like a kernel entry: deleted, searched
again, with one warning (it used to raise NotADirectoryError on every call)."""

import shutil
import warnings

import pytest
from search_test_support import CONFIG, Searches, graphs

from mirage_jax.superopt import search_cache


def a_file_for_the_entry(entry):
    shutil.rmtree(entry)
    entry.write_text("not an entry")


def a_directory_for_the_result(entry):
    (entry / "result.json").unlink()
    (entry / "result.json").mkdir()


@pytest.mark.parametrize("shape", [a_file_for_the_entry, a_directory_for_the_result])
def test_a_search_entry_of_the_wrong_shape_is_searched_again(monkeypatch, tmp_path, shape):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    searches = Searches()
    search_cache.cached_search(graphs()[0], CONFIG, "cpu", searches)
    (entry,) = [p for p in (tmp_path / "cache" / "searches").iterdir() if p.name != ".locks"]
    shape(entry)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, hit = search_cache.cached_search(graphs()[0], CONFIG, "cpu", searches)
    assert not hit and searches.calls == 2
    assert len([w for w in caught if "is corrupt" in str(w.message)]) == 1
    assert entry.is_dir() and not entry.is_symlink()
    _, hit = search_cache.cached_search(graphs()[0], CONFIG, "cpu", searches)
    assert hit and searches.calls == 2
