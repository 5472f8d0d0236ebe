"""The aicf Python package (python/): compile, load, run, explain, errors, threads.

Run by tests/python/run_pytest.sh (ctest `python/pytest`) against the package built from the
install tree. Numerical checks compare with the stored references of testdata/models with the
tolerance the C++ tests use for fp32 host plans: |got - want| <= 1e-4 + 1e-4 |want|."""
import os
import threading

import numpy as np
import pytest

import aicf

TESTDATA = os.environ["AICF_TESTDATA"]
MODELS = os.path.join(TESTDATA, "models")


def model_path(name):
    return os.path.join(MODELS, name, "model.onnx")


def load_npy(name, kind, tensor):
    return np.load(os.path.join(MODELS, name, kind, tensor + ".npy"))


def assert_close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp") / "out"
    aicf.compile(model_path("mlp_op17"), out)
    return str(out)


def test_compile_load_run_matches_reference(mlp):
    m = aicf.load(mlp, threads=2)
    assert m.input_names == ["x"] and m.output_names == ["logits"]
    (x_info,) = m.inputs
    assert (x_info.dtype, x_info.shape, x_info.numpy_dtype) == ("f32", (8, 64), np.float32)
    assert m.outputs[0].shape == (8, 10) and m.outputs[0].bytes == 320
    x = load_npy("mlp_op17", "inputs", "x")
    y = m.run({"x": x})
    assert list(y) == ["logits"] and y["logits"].dtype == np.float32
    assert_close(y["logits"], load_npy("mlp_op17", "outputs", "logits"))
    # Keyword form, __call__, and a non-contiguous input (one copy made by the binding).
    assert_close(m(x=x)["logits"], y["logits"])
    xf = np.asfortranarray(x)
    assert not xf.flags.c_contiguous
    assert_close(m.run(x=xf)["logits"], y["logits"])
    # Each run returns new arrays: an earlier result is not overwritten.
    first = m.run(x=x)["logits"]
    m.run(x=np.zeros_like(x))
    assert_close(first, y["logits"])


def test_load_device(mlp):
    """load(device=) is aicf_open_device: device 0 is the default; a cpu plan takes 0 only."""
    assert aicf.load(mlp, device=0).output_names == ["logits"]
    with pytest.raises(aicf.Error, match=r"is a cpu plan: it runs on the host, not on device 1$"):
        aicf.load(mlp, device=1)


def test_compile_from_bytes_and_bundle(tmp_path):
    with open(model_path("mlp_op13"), "rb") as f:
        data = f.read()
    c = aicf.compile(data, tmp_path / "b", bundle=True)
    assert sorted(os.listdir(c.folder)) == [".aicf-output", "libmodel.so", "plan.yaml",
                                            "weights.bin"]
    assert c.plan["schema"] == "aicf-plan/1" and c.plan["target"]["kind"] == "cpu"
    y = aicf.load(c.folder).run(x=load_npy("mlp_op13", "inputs", "x"))
    assert_close(y["logits"], load_npy("mlp_op13", "outputs", "logits"))


def test_ranged_dims_run_every_batch(tmp_path):
    out = tmp_path / "dyn"
    aicf.compile(model_path("mlp_dyn_op13"), out, dims={"batch": (1, 64, 8)})
    m = aicf.load(out)
    assert m.dims == {"batch": (1, 64, 8)}
    x = load_npy("mlp_dyn_op13", "inputs", "x")
    want = load_npy("mlp_dyn_op13", "outputs", "logits")
    # The MLP's rows are independent: any leading batch of rows gives those rows' outputs.
    for b in (1, 3, 8):
        y = m.run(x=np.ascontiguousarray(x[:b]))["logits"]
        assert y.shape == (b, 10)
        assert_close(y, want[:b])
        assert m.inputs[0].shape == (b, 64)
    big = np.concatenate([x] * 8)  # 64 rows: the range's end
    assert_close(m.run(x=big)["logits"], np.concatenate([want] * 8))
    with pytest.raises(aicf.Error, match=r"dim 0 \(batch\) is 65, outside batch's range 1\.\.64"):
        m.run(x=np.zeros((65, 64), np.float32))


def test_many_inputs_and_dtypes(tmp_path):
    out = tmp_path / "dtypes"
    aicf.compile(model_path("dtypes_op17"), out)
    m = aicf.load(out)
    inputs_dir = os.path.join(MODELS, "dtypes_op17", "inputs")
    feeds = {f[:-4]: np.load(os.path.join(inputs_dir, f)) for f in os.listdir(inputs_dir)}
    assert sorted(feeds) == sorted(m.input_names)
    y = m.run(feeds)
    assert list(y) == m.output_names
    for name, got in y.items():
        want = load_npy("dtypes_op17", "outputs", name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if got.dtype.kind == "f":
            assert_close(got, want)
        else:
            np.testing.assert_array_equal(got, want)


def test_explain_as_python_objects(tmp_path):
    out = tmp_path / "gpt2"
    c = aicf.compile(model_path("gpt2_block_op17"), out, explain=True)
    e = c.explain()
    attention = [r for r in e.rewrites if r["pass"] == "detect-attention"]
    assert attention and attention[0]["applied"] is True
    cert = attention[0]["certificates"][0]
    assert cert["property"] == "weighted_streaming_reduction" and cert["holds"] is True
    assert all(cond["held"] for cond in cert["conditions"])
    assert len(e.steps) == len(aicf.load(out).profile(
        {t.name: np.zeros(t.shape, t.numpy_dtype) for t in aicf.load(out).inputs})[1])
    for s in e.steps:
        pred = s["hints"]["predicted"]
        assert pred["bytes"] >= pred["lower_bound_bytes"] > 0 and pred["time_us"] > 0
    with pytest.raises(aicf.Error, match="compile with explain=True"):
        aicf.explain(out.parent / "nothing")


def test_profile_gives_each_step(mlp):
    m = aicf.load(mlp)
    y, steps = m.profile(x=load_npy("mlp_op17", "inputs", "x"))
    assert_close(y["logits"], load_npy("mlp_op17", "outputs", "logits"))
    assert [s["kind"] for s in steps] == [s["kind"] for s in m.plan["steps"]]
    assert all(s["seconds"] >= 0 and s["symbol"] for s in steps)


def test_errors_name_what_is_wrong(mlp, tmp_path):
    m = aicf.load(mlp)
    x = load_npy("mlp_op17", "inputs", "x")
    with pytest.raises(KeyError, match="input 'x' is missing"):
        m.run({})
    with pytest.raises(KeyError, match="'y' is not an input of the model"):
        m.run(x=x, y=x)
    with pytest.raises(TypeError, match=r"input 'x' is float64; the model takes f32"):
        m.run(x=x.astype(np.float64))
    with pytest.raises(aicf.Error, match="shape"):
        m.run(x=np.zeros((4, 64), np.float32))  # a static folder takes only its own shape
    with pytest.raises(aicf.Error, match="1 to 1024"):
        m.threads = 0
    with pytest.raises(aicf.Error, match="cannot open"):
        aicf.load(tmp_path / "missing")
    with pytest.raises(aicf.CompileError) as err:
        aicf.compile(tmp_path / "missing.onnx", tmp_path / "o")
    assert err.value.returncode == 1 and "cannot open" in err.value.message
    m.close()
    with pytest.raises(aicf.Error, match="closed"):
        m.run(x=x)


def test_threads_share_a_model_and_run_models_in_parallel(mlp):
    x = load_npy("mlp_op17", "inputs", "x")
    want = load_npy("mlp_op17", "outputs", "logits")
    shared = aicf.load(mlp, threads=1)
    models = [aicf.load(mlp, threads=1) for _ in range(2)]
    errors = []

    def work(model, scale):
        try:
            for _ in range(25):
                y = model.run(x=x * scale)["logits"]
                if scale == 1:
                    assert_close(y, want)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(shared, s)) for s in (1, 1, 0.5)]
    threads += [threading.Thread(target=work, args=(mdl, 1)) for mdl in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_lengths_known_only_at_run_time(tmp_path):
    # NonMaxSuppression then a gather of the kept boxes (testdata/data_dims/nms_gather): each run
    # returns arrays of the length it produced, growing and shrinking, an empty one among them.
    d = os.path.join(TESTDATA, "data_dims", "nms_gather")
    out = tmp_path / "nms"
    aicf.compile(os.path.join(d, "model.onnx"), out)
    m = aicf.load(str(out), threads=1)
    for k in [0, 2, 1, 0]:
        case = os.path.join(d, "case%d" % k)
        feeds = {n: np.load(os.path.join(case, n + ".npy")) for n in ("boxes", "scores")}
        got = m.run(feeds)
        for name in ("selected", "kept"):
            want = np.load(os.path.join(case, name + ".npy"))
            assert got[name].shape == want.shape
            np.testing.assert_array_equal(got[name], want)
