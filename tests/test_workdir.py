"""The stage cache: folders named by inputs and parameters, keys handed downstream by content."""
import hashlib
import json

from pivot.pipeline.run import VOLATILE, Workdir, content_key


def _write(folder, name, data):
    (folder / name).write_bytes(data)


def test_content_key_is_sha256_of_names_and_file_digests(tmp_path):
    _write(tmp_path, "b.npy", b"BB")
    _write(tmp_path, "a.txt", b"A")
    _write(tmp_path, "DONE", b"ignored")
    _write(tmp_path, VOLATILE, b"ignored too")
    # By hand: files in name order, each as name NUL hex-sha256(bytes) NUL.
    digest = lambda b: hashlib.sha256(b).hexdigest().encode()
    expected = hashlib.sha256(b"a.txt\0" + digest(b"A") + b"\0b.npy\0" + digest(b"BB") + b"\0").hexdigest()[:16]
    assert content_key(tmp_path) == expected
    # Hashed by an engine's tasks (here in process): the same key.
    from pivot.pipeline.engine import Engine

    assert content_key(tmp_path, Engine(workers=1)) == expected


def test_downstream_key_follows_upstream_bytes_not_parameters(tmp_path):
    """Same parameters, different bytes (an unseeded aligner): the key downstream differs."""
    keys = []
    for run, links in enumerate((b"0-0 1-1", b"0-1 1-0")):
        wd = Workdir(tmp_path / f"run{run}")
        _, align_key = wd.stage("align.fr", {"corpus": "c1"}, {}, lambda tmp: _write(tmp, "links.json", links))
        _, enc_key = wd.stage("encode", {"align": [align_key]}, {}, lambda tmp: _write(tmp, "shards.json", b"same"))
        keys.append((align_key, enc_key))
        # The folder name comes from the inputs' keys and the parameters, identical in both runs.
        assert (wd.root / f"align.fr-{_folder_key('align.fr', {'corpus': 'c1'})}").is_dir()
    assert keys[0][0] != keys[1][0]
    # encode's bytes are equal, so its own content key is equal, but it was built from
    # a different folder (its inputs' key differs): both runs rebuilt it.
    assert keys[0][1] == keys[1][1]


def test_reuse_returns_the_recorded_content_key(tmp_path):
    wd = Workdir(tmp_path)
    calls = []

    def produce(tmp):
        calls.append(1)
        _write(tmp, "stats.json", b"1")
        _write(tmp, VOLATILE, json.dumps({"seconds": len(calls)}).encode())

    first = wd.stage("lm", {}, {"k": 1}, produce)
    again = Workdir(tmp_path).stage("lm", {}, {"k": 1}, produce)
    assert first == again and len(calls) == 1
    assert first[1] == hashlib.sha256(b"stats.json\x00" + hashlib.sha256(b"1").hexdigest().encode()
                                      + b"\x00").hexdigest()[:16]


def _folder_key(name, inputs, params=None):
    from pivot.pipeline.graph import STAGES
    from pivot.pipeline.stage import key_of
    return key_of({"stage": name, "version": STAGES[name.split(".")[0]].version, "inputs": inputs,
                   "params": params or {}})


def test_undeclared_input_is_refused(tmp_path):
    """The graph in pivot/pipeline/graph.py is enforced: pivot does not read the corpus."""
    import pytest

    with pytest.raises(RuntimeError, match="declared"):
        Workdir(tmp_path).stage("pivot", {"corpus": "c1"}, {}, lambda tmp: None)


def test_graph_order_puts_every_stage_after_its_inputs():
    from pivot.pipeline.graph import STAGES, order

    seen = order()
    assert seen[0] == "corpus" and set(seen) == set(STAGES)
    for name in seen:
        assert all(seen.index(up) < seen.index(name) for up in STAGES[name].needs)


def test_stages_side_by_side_are_the_stages_one_by_one(tmp_path):
    """Workdir.stages: the jobs of the stages not yet complete run together; each stage gets the
    folder and content key Workdir.stage gives it, and a complete one is reused, its job not run."""
    from pivot.pipeline.engine import Batch

    def job(tmp, data):
        # one batch of tasks (len of the data, in this process), then the file written here
        n = yield Batch(len, [(data,)], name="n")
        _write(tmp, "links.json", data * n[0])

    one = Workdir(tmp_path / "one")
    expected = [one.stage("align.fr", {"corpus": "c1"}, {}, lambda tmp: _write(tmp, "links.json", b"ab" * 2)),
                one.stage("align.de", {"corpus": "c2"}, {}, lambda tmp: _write(tmp, "links.json", b"c" * 1))]
    together = Workdir(tmp_path / "two")
    ran = []

    def spec(name, corpus, data):
        def stage_job(tmp):
            ran.append(name)
            yield from job(tmp, data)
        return name, {"corpus": corpus}, {}, stage_job

    got = together.stages([spec("align.fr", "c1", b"ab"), spec("align.de", "c2", b"c")])
    assert [key for _, key in got] == [key for _, key in expected]
    assert [p.name for p, _ in got] == [p.name for p, _ in expected]
    assert sorted(together.built) == ["align.de", "align.fr"] and ran == ["align.fr", "align.de"]
    # a second call finds both complete: nothing runs
    again = Workdir(tmp_path / "two").stages([spec("align.fr", "c1", b"ab"), spec("align.de", "c2", b"c")])
    assert again == got and ran == ["align.fr", "align.de"]
