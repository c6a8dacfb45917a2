"""Packed equals unpacked, through verl's own forward: several sequences of different lengths in one
remove-padding row (`use_remove_padding`, the reference run's setting) get the per-token log-probs
each gets alone, for the reference family (the tiny Qwen3.5: hybrid Gated-DeltaNet and attention
layers) and the tiny Qwen3, in float32 within 1e-5.

The row is what verl's FSDP engine hands the model (`FSDPEngine.prepare_model_inputs` under
remove-padding): input_ids (1, total), position_ids restarting at 0 for each sequence, and, for a
forward that names them (verl's qwen3_5 forward does), `cu_seqlens` / `cu_seqlens_cpu` from the
nested batch's offsets. The model is patched by verl's own `apply_monkey_patch`, as the engine
builds it. On this machine there is no fla and no causal-conv1d, so verl takes its fallbacks: the
convolution once per packed sequence (`_packed_causal_conv1d_fallback`) and the chunked delta rule
once per packed sequence, which is what patch 0019 makes it do (stock verl handed the whole row to
transformers' torch fallback, which ignores `cu_seqlens`: the recurrent state leaked). Each
family's boundary information is dropped once to show the comparison sees a leak: the Qwen3.5
row without `cu_seqlens`, the Qwen3 row without its position resets (transformers masks the
attention block-diagonally from them)."""

from __future__ import annotations

import importlib
import inspect

import pytest

torch = pytest.importorskip("torch")

LENGTHS = (11, 29, 7)
TOLERANCE = 1e-5


def log_probs(logits, ids):
    """log p(ids[t+1] | ids[..t]) for each position but the last: what the actor trains on."""
    return torch.log_softmax(logits[:-1].double(), -1).gather(-1, ids[1:, None])[:, 0]


def packed(model, seqs, *, boundaries: bool = True, resets: bool = True):
    ids = torch.cat(seqs)[None]
    offsets = torch.tensor([0, *torch.tensor([len(s) for s in seqs]).cumsum(0).tolist()])
    position_ids = (torch.cat([torch.arange(len(s)) for s in seqs]) if resets else torch.arange(ids.shape[1]))[None]
    extra = {}
    if boundaries and "cu_seqlens" in inspect.signature(model.forward).parameters:  # as the engine decides
        extra = {"cu_seqlens": offsets, "cu_seqlens_cpu": offsets.clone()}
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=None, position_ids=position_ids, use_cache=False, **extra).logits[0]
    return [log_probs(logits[a:b], ids[0, a:b]) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def alone(model, seq):
    with torch.no_grad():
        logits = model(input_ids=seq[None], attention_mask=None, position_ids=torch.arange(len(seq))[None],
                       use_cache=False).logits[0]
    return log_probs(logits, seq)


def gaps(model, seqs, **kw) -> list[float]:
    return [float((p - a).abs().max()) for p, a in zip(packed(model, seqs, **kw), [alone(model, s) for s in seqs])]


def verl_model(family: str, tmp_path):
    """The tiny model of `family`, float32, sdpa, patched by verl as its FSDP engine patches it for
    remove-padding (no fused kernels, sequence parallel 1)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    from verl.models.transformers.monkey_patch import apply_monkey_patch

    from trainer.verl.tiny import build_tiny_qwen3, build_tiny_qwen3_5

    if family == "qwen3_5":
        # linear-attention heads of 32: there the torch delta rule run over a whole packed row (stock
        # verl's choice, patch 0019) moves the next sequence's log-probs far past the tolerance; at
        # the smoke's 64 it moved them by 1.2e-7 on this random model, too little to show the leak
        path, auto = build_tiny_qwen3_5(tmp_path / family, linear_head_dim=32), AutoModelForImageTextToText
    else:
        path, auto = build_tiny_qwen3(tmp_path / family), AutoModelForCausalLM
    model = auto.from_pretrained(str(path), dtype=torch.float32, attn_implementation="sdpa").eval()
    apply_monkey_patch(model, use_remove_padding=True, ulysses_sp_size=1, use_fused_kernels=False)
    return model


@pytest.fixture(autouse=True)
def verls_patch_undone():
    """verl's `apply_monkey_patch` replaces forwards on transformers' classes for the whole process;
    put them back after each test, so a later test in the same worker runs transformers' own."""
    import transformers.models.qwen3.modeling_qwen3 as q3
    import transformers.models.qwen3_5.modeling_qwen3_5 as q35

    saved = [(cls, dict(vars(cls))) for mod in (q3, q35) for cls in vars(mod).values()
             if isinstance(cls, type) and cls.__module__ == mod.__name__]
    yield
    for cls, attrs in saved:
        for name in set(vars(cls)) - set(attrs):
            delattr(cls, name)
        for name, value in attrs.items():
            if vars(cls).get(name) is not value and name not in ("__dict__", "__weakref__"):
                setattr(cls, name, value)


@pytest.fixture
def seqs():
    gen = torch.Generator().manual_seed(0)
    return [torch.randint(0, 5000, (n,), generator=gen) for n in LENGTHS]


def test_packed_qwen3_5_equals_each_sequence_alone_and_a_row_without_boundaries_leaks(tmp_path, seqs):
    import verl.models.transformers.qwen3_5 as q

    from trainer.verl.patching import patches, site_of_installed, state

    p19 = next(p for p in patches() if p.path.name.startswith("0019-"))
    assert state(site_of_installed(), p19).state == "applied", "tests/conftest.py applies verl's patches first"
    model = verl_model("qwen3_5", tmp_path)
    layers = model.config.text_config.layer_types
    assert "linear_attention" in layers and "full_attention" in layers
    assert model.model.language_model.layers[0].linear_attn.causal_conv1d_fn is None  # the fallbacks, as on a CPU
    assert max(gaps(model, seqs)) <= TOLERANCE
    assert min(gaps(model, seqs, boundaries=False)[1:]) > 1e-3  # the state of one sequence flows into the next
    # verl's stock test for "takes cu_seqlens" said yes to transformers' torch fallback (**kwargs),
    # which ignores it: the same leak with the boundaries given
    stock = q._call_accepts_kwarg
    try:
        q._call_accepts_kwarg = lambda fn, name: (name in inspect.signature(fn).parameters or any(
            p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()))
        assert max(gaps(model, seqs)) > 10 * TOLERANCE
    finally:
        q._call_accepts_kwarg = stock


def test_packed_qwen3_equals_each_sequence_alone_and_a_row_without_position_resets_leaks(tmp_path, seqs):
    model = verl_model("qwen3", tmp_path)
    assert "cu_seqlens" not in inspect.signature(model.forward).parameters  # the engine passes positions only
    assert max(gaps(model, seqs)) <= TOLERANCE
    assert min(gaps(model, seqs, resets=False)[1:]) > 1e-3  # attention reaches into the previous sequence


def test_fla_names_the_parameters_verl_asks_for_where_it_is_installed():
    """On a GPU node fla's kernel takes the whole row with its boundaries: it names `cu_seqlens`,
    `cu_seqlens_cpu` and `cp_context`, so patch 0019 (a named parameter only) changes nothing there."""
    try:
        fla = importlib.import_module("fla.ops.gated_delta_rule")
    except Exception as e:  # noqa: BLE001 - not installed, or no GPU driver for its import
        pytest.skip(f"fla does not import here ({type(e).__name__}): this runs where fla is installed (a GPU node)")
    params = inspect.signature(fla.chunk_gated_delta_rule).parameters
    assert {"cu_seqlens", "cu_seqlens_cpu", "cp_context"} <= set(params)
