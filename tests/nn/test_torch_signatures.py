"""The keyword names of fusegrad's ``torch.*`` and ``torch.nn.functional`` functions are
PyTorch's.

``TORCH`` and ``FUNCTIONAL`` are PyTorch's documented signatures (parameter names
in order, ``*`` before keyword-only ones). The walk checks that every function
fusegrad offers under a PyTorch name is in the tables, and that it accepts each
name (positional ones in PyTorch's order); the calls check that ``dim``,
``keepdim``, ``dtype`` and ``out`` do what they say against NumPy. With PyTorch
installed, the tables themselves are checked against its signatures
(``inspect.signature`` where it has one, its docstrings' signature lines
otherwise) and the calls against its results.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn.functional as F
from fusegrad.eager.functions import _KW_ALIASES, _KW_POSITIONAL, METHOD_FUNCTIONS
from tests.helpers import assert_close

_UNARY = (
    "abs", "absolute", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos",
    "cosh", "erf", "exp", "expm1", "floor", "log", "log10", "log1p", "log2", "neg", "negative",
    "reciprocal", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh",
)
_BINARY = (
    "atan2", "eq", "ge", "gt", "le", "lt", "ne", "maximum", "minimum", "mul", "multiply",
    "floor_divide", "remainder", "logical_and", "logical_or", "logical_xor",
)

TORCH: dict[str, str] = {
    **{n: "input * out" for n in _UNARY},
    **{n: "input other * out" for n in _BINARY}, "true_divide": "dividend divisor * out",
    "isfinite": "input", "isnan": "input", "logical_not": "input * out", "relu": "input",
    "t": "input", "clone": "input * memory_format",
    "add": "input other * alpha out", "sub": "input other * alpha out",
    "subtract": "input other * alpha out", "div": "input other * rounding_mode out",
    "divide": "input other * rounding_mode out", "pow": "input exponent * out",
    "matmul": "input other * out", "mm": "input mat2 * out", "bmm": "input mat2 * out",
    "mv": "input vec * out", "outer": "input vec2 * out", "dot": "input tensor * out",
    "all": "input dim keepdim * out", "any": "input dim keepdim * out",
    "amax": "input dim keepdim * out", "amin": "input dim keepdim * out",
    "argmax": "input dim keepdim", "argmin": "input dim keepdim",
    "max": "input dim keepdim * out", "min": "input dim keepdim * out",  # and (input, other)
    "sum": "input dim keepdim * dtype", "mean": "input dim keepdim * dtype out",
    "prod": "input dim keepdim * dtype", "std": "input dim * correction keepdim out",
    "var": "input dim * correction keepdim out", "norm": "input p dim keepdim out dtype",
    "logsumexp": "input dim keepdim * out", "cumsum": "input dim * dtype out",
    "count_nonzero": "input dim", "softmax": "input dim * dtype",
    "log_softmax": "input dim * dtype", "allclose": "input other rtol atol equal_nan",
    "equal": "input other", "clamp": "input min max * out", "clip": "input min max * out",
    "lerp": "input end weight * out", "masked_fill": "input mask value",
    "where": "condition input other * out", "cat": "tensors dim * out",
    "concat": "tensors dim * out", "concatenate": "tensors axis * out",
    "stack": "tensors dim * out", "chunk": "input chunks dim",
    "split": "tensor split_size_or_sections dim", "flatten": "input start_dim end_dim",
    "flip": "input dims", "gather": "input dim index * sparse_grad out",
    "index_select": "input dim index * out", "narrow": "input dim start length",
    "permute": "input dims", "reshape": "input shape", "select": "input dim index",
    "squeeze": "input dim", "unsqueeze": "input dim", "transpose": "input dim0 dim1",
    "unbind": "input dim", "diagonal": "input offset dim1 dim2",
    "tril": "input diagonal * out", "triu": "input diagonal * out",
    "topk": "input k dim largest sorted * out", "sort": "input dim descending * stable out",
    "argsort": "input dim descending * stable",
    "multinomial": "input num_samples replacement * generator out",
    "round": "input * decimals out", "numel": "input", "is_floating_point": "input",
}  # fmt: skip

#: (function, name) pairs PyTorch has and fusegrad does not accept yet, with the reason
NOT_YET = {
    ("concatenate", "axis"): "fusegrad's concatenate is cat (dim=); NumPy's axis= name",
}

FUNCTIONAL: dict[str, str] = {
    "softmax": "input dim _stacklevel dtype", "log_softmax": "input dim _stacklevel dtype",
    "relu": "input inplace", "sigmoid": "input", "gelu": "input approximate",
    "softplus": "input beta threshold", "linear": "input weight bias",
    "elu": "input alpha inplace", "leaky_relu": "input negative_slope inplace",
    "cross_entropy": "input target weight size_average ignore_index reduce reduction "
                     "label_smoothing",
    "nll_loss": "input target weight size_average ignore_index reduce reduction",
    "mse_loss": "input target size_average reduce reduction weight",
    "l1_loss": "input target size_average reduce reduction weight",
    "smooth_l1_loss": "input target size_average reduce reduction beta",
    "huber_loss": "input target reduction delta weight",
    "binary_cross_entropy": "input target weight size_average reduce reduction",
    "binary_cross_entropy_with_logits": "input target weight size_average reduce reduction "
                                        "pos_weight",
    "kl_div": "input target size_average reduce reduction log_target",
    "conv1d": "input weight bias stride padding dilation groups",
    "conv2d": "input weight bias stride padding dilation groups",
    "conv3d": "input weight bias stride padding dilation groups",
    "max_pool1d": "input kernel_size stride padding dilation ceil_mode return_indices",
    "max_pool2d": "input kernel_size stride padding dilation ceil_mode return_indices",
    "max_pool3d": "input kernel_size stride padding dilation ceil_mode return_indices",
    "avg_pool1d": "input kernel_size stride padding ceil_mode count_include_pad",
    "avg_pool2d": "input kernel_size stride padding ceil_mode count_include_pad "
                  "divisor_override",
    "avg_pool3d": "input kernel_size stride padding ceil_mode count_include_pad "
                  "divisor_override",
    "batch_norm": "input running_mean running_var weight bias training momentum eps",
    "layer_norm": "input normalized_shape weight bias eps",
    "dropout": "input p training inplace",
    "embedding": "input weight padding_idx max_norm norm_type scale_grad_by_freq sparse",
    "scaled_dot_product_attention": "query key value attn_mask dropout_p is_causal scale "
                                    "enable_gqa",
}

#: fusegrad's own functions in ``fusegrad.nn.functional`` (no PyTorch counterpart)
FUNCTIONAL_OWN = {"erf", "log_sigmoid", "logsumexp", "dropout_with_key"}


def _parse(spec: str) -> tuple[list[str], list[str]]:
    """(positional names, keyword-only names) of a table entry."""
    head, _, tail = spec.partition("*")
    return head.split(), tail.split()


def _accepted(fn, name: str) -> tuple[list[str], set[str], bool]:
    """(positional parameter names in order, all names, takes **kwargs) of what
    ``fusegrad.<name>`` accepts; a method function forwards to the Tensor method."""
    if name in METHOD_FUNCTIONS:
        params = list(inspect.signature(getattr(fg.Tensor, name)).parameters.values())
        params[0] = params[0].replace(name="input")
        extra = {"out", *_KW_ALIASES.get(name, {})}
    else:
        params = list(inspect.signature(fn).parameters.values())
        extra = set()
    kinds = inspect.Parameter
    positional = (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD, kinds.VAR_POSITIONAL)
    pos = [p.name for p in params if p.kind in positional]
    names = {p.name for p in params if p.kind is not kinds.VAR_POSITIONAL} | extra
    if name in _KW_POSITIONAL:  # Tensor.flip(*dims): fusegrad.flip(x, dims=...) too
        names.add(_KW_POSITIONAL[name])
    varkw = any(p.kind is p.VAR_KEYWORD for p in params)
    return pos, names, varkw


def _torch_functions() -> list[str]:
    return sorted(n for n in set(fg.__all__) if n in TORCH or n in METHOD_FUNCTIONS
                  or n in ("tril", "triu", "topk", "multinomial", "sort", "argsort", "cat",
                           "stack", "where", "diagonal"))


def test_every_offered_torch_function_is_in_the_table():
    missing = [n for n in _torch_functions() if n not in TORCH]
    assert not missing, f"add PyTorch's signature of {missing} to TORCH"
    offered = set(F.__all__) - FUNCTIONAL_OWN
    assert offered <= set(FUNCTIONAL), f"add {sorted(offered - set(FUNCTIONAL))} to FUNCTIONAL"


@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_function_accepts_pytorch_names(name):
    pos, names, varkw = _accepted(getattr(fg, name), name)
    want_pos, want_kw = _parse(TORCH[name])
    # the first argument is passed positionally in practice (PyTorch names it input,
    # tensor or tensors); the others must be accepted by name
    for k in [*want_pos[1:], *want_kw]:
        if (name, k) in NOT_YET:
            continue
        aliases = _KW_ALIASES.get(name, {})
        assert k in names or k in aliases or varkw, f"fusegrad.{name} does not take {k}="
    want_pos = [k for k in want_pos if k != "out"]  # out= is keyword-only in fusegrad
    assert pos[1:len(want_pos)] == want_pos[1:] or name in _KW_ALIASES \
        or name == "concatenate", \
        f"fusegrad.{name}: positional order {pos} differs from PyTorch's {want_pos}"


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_accepts_pytorch_names(name):
    params = inspect.signature(getattr(F, name)).parameters
    want_pos, want_kw = _parse(FUNCTIONAL[name])
    for k in want_pos + want_kw:
        assert k in params, f"nn.functional.{name} does not take {k}="
    pos = [p for p in params if params[p].kind is params[p].POSITIONAL_OR_KEYWORD]
    assert pos[:len(want_pos)] == want_pos, f"nn.functional.{name}: positional order {pos}"


def _torch_doc_names(torch, name: str) -> set[str] | None:
    doc = getattr(torch, name).__doc__ or ""
    sigs = re.findall(rf"(?:^|::)\s*(?:torch\.)?{name}\((.*?)\)\s*(?:->|$)", doc, re.M)
    if not sigs:
        return None
    names = set()
    for s in sigs:
        names |= {p.split("=")[0].split(":")[0].strip() for p in s.split(",")} - {"*", ""}
    return names


def test_tables_match_pytorch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF

    for name, spec in FUNCTIONAL.items():
        try:
            theirs = list(inspect.signature(getattr(TF, name)).parameters)
        except (TypeError, ValueError):
            continue  # a builtin without a signature: the table is from the docs
        if theirs in (["args", "kwargs"], ["input", "args", "kwargs"]):
            continue
        ours = [n for n in spec.split() if n != "*"]
        assert theirs == ours, f"{name}: torch has {theirs}"
    checked = 0
    for name, spec in TORCH.items():
        documented = _torch_doc_names(torch, name)
        if documented is None:
            continue
        checked += 1
        ours = set(spec.split()[1:]) - {"*", "out"}  # the first argument is positional
        assert ours <= documented, \
            f"torch.{name} documents {sorted(documented)}, the table says {sorted(ours)}"
    assert checked > 40


X = np.arange(24.0).reshape(2, 3, 4) * 0.25 - 2.0

#: calls with PyTorch's keyword names, against the NumPy result
CALLS = [
    ("sum", dict(dim=1, keepdim=True, dtype=fg.float32), lambda x: x.sum(1, keepdims=True)),
    ("mean", dict(dim=(0, 2), keepdim=False), lambda x: x.mean((0, 2))),
    ("prod", dict(dim=2, keepdim=True), lambda x: x.prod(2, keepdims=True)),
    ("amax", dict(dim=-1, keepdim=True), lambda x: x.max(-1, keepdims=True)),
    ("amin", dict(dim=0), lambda x: x.min(0)),
    ("logsumexp", dict(dim=1, keepdim=True),
     lambda x: np.log(np.exp(x).sum(1, keepdims=True))),
    ("std", dict(dim=2, correction=0, keepdim=True), lambda x: x.std(2, keepdims=True)),
    ("var", dict(dim=1, correction=1), lambda x: x.var(1, ddof=1)),
    ("norm", dict(p=1, dim=2, keepdim=False), lambda x: np.abs(x).sum(2)),
    ("cumsum", dict(dim=1, dtype=fg.float64), lambda x: x.cumsum(1)),
    ("softmax", dict(dim=-1, dtype=fg.float64),
     lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    ("log_softmax", dict(dim=0),
     lambda x: x - np.log(np.exp(x).sum(0, keepdims=True))),
    ("tril", dict(diagonal=-1), lambda x: np.tril(x, -1)),
    ("triu", dict(diagonal=1), lambda x: np.triu(x, 1)),
    ("flatten", dict(start_dim=1, end_dim=2), lambda x: x.reshape(2, 12)),
    ("transpose", dict(dim0=0, dim1=2), lambda x: x.transpose(2, 1, 0)),
    ("clamp", dict(min=-1.0, max=1.0), lambda x: np.clip(x, -1, 1)),
    ("round", dict(decimals=1), lambda x: np.round(x, 1)),
    ("exp", {}, np.exp),
]


@pytest.mark.parametrize("name,kwargs,ref", CALLS, ids=[c[0] for c in CALLS])
def test_keyword_calls_against_numpy(name, kwargs, ref):
    x = fg.tensor(X)
    got = getattr(fg, name)(x, **kwargs)
    assert_close(got.numpy(), ref(X), "f32" if got.dtype == fg.float32 else "exact64")
    out = fg.empty(*got.shape, dtype=got.dtype)
    assert getattr(fg, name)(x, **kwargs, out=out) is out
    assert_close(out.numpy(), got.numpy(), "exact64")


def test_number_first_and_other_overloads():
    a = fg.tensor([1.0, 5.0], requires_grad=True)
    b = fg.tensor([3.0, 2.0])
    p = fg.pow(2, a)
    assert p.grad_fn.name() == "PowBackward2" and p.tolist() == [2.0, 32.0]
    assert fg.sub(1, a).tolist() == [0.0, -4.0] and fg.add(1, a, alpha=2).tolist() == [3, 11]
    assert fg.max(a, b).tolist() == [3.0, 5.0] and fg.min(a, other=b).tolist() == [1.0, 2.0]


def test_max_min_with_dim_return_values_and_indices():
    m = fg.max(fg.tensor(X), dim=1, keepdim=True)
    assert_close(m.values.numpy(), X.max(1, keepdims=True), "exact64")
    assert_close(m.indices.numpy(), X.argmax(1)[:, None], "exact64")
    assert_close(fg.argmin(fg.tensor(X), dim=2, keepdim=False).numpy(), X.argmin(2), "exact64")


def test_functional_keywords_against_numpy():
    x = fg.tensor(X, requires_grad=True)
    s = F.softmax(x, dim=1)
    assert s.grad_fn.name() == "SoftmaxBackward0"
    assert_close(s.detach().numpy(), np.exp(X) / np.exp(X).sum(1, keepdims=True), "exact64")
    ls = F.log_softmax(x, dim=-1, dtype=fg.float32)
    assert ls.dtype == fg.float32 and ls.grad_fn.name() == "LogSoftmaxBackward0"
    # NumPy's axis= still works, on arrays and Tensors
    assert_close(F.softmax(X, axis=0), np.exp(X) / np.exp(X).sum(0, keepdims=True), "exact64")
    assert_close(F.log_softmax(x, axis=2).detach().numpy(),
                 X - np.log(np.exp(X).sum(2, keepdims=True)), "exact64")
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        assert_close(F.softmax(x).detach().numpy(),
                     np.exp(X) / np.exp(X).sum(0, keepdims=True), "exact64")
    with pytest.raises(TypeError, match="both dim"):
        F.softmax(x, dim=0, axis=1)
    sp = F.softplus(fg.tensor(X), beta=2.0, threshold=1.0).numpy()
    assert_close(sp, np.where(2 * X > 1, X, np.log1p(np.exp(2 * X)) / 2), "exact64")
    r = fg.tensor(X)
    assert F.relu(r, inplace=True) is r and (r.numpy() >= 0).all()


def test_legacy_reduction_flags_and_label_smoothing():
    rng = np.random.default_rng(0)
    logits, t = rng.standard_normal((5, 4)), np.array([0, 3, 1, 2, 1])
    x, tt = fg.tensor(logits), fg.tensor(t)
    with pytest.warns(UserWarning, match="size_average and reduce"):
        s = F.cross_entropy(x, tt, size_average=False)
    assert_close(s.numpy(), F.cross_entropy(x, tt, reduction="sum").numpy(), "exact64")
    with pytest.warns(UserWarning):
        n = F.mse_loss(x, x * 0, reduce=False)
    assert_close(n.numpy(), logits ** 2, "exact64")
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    eps = 0.1
    ref = np.mean((1 - eps) * -logp[np.arange(5), t] + eps * -logp.mean(1))
    assert_close(F.cross_entropy(x, tt, label_smoothing=eps).numpy(), ref, "exact64")


def test_regression_loss_weights():
    x, w = np.array([1.0, -2.0, 3.0]), np.array([1.0, 0.0, 2.0])
    tx, tz, tw = fg.tensor(x), fg.zeros(3), fg.tensor(w)
    assert_close(F.mse_loss(tx, tz, weight=tw).numpy(), np.mean(w * x ** 2), "exact64")
    assert_close(F.l1_loss(tx, tz, weight=tw, reduction="sum").numpy(), np.sum(w * abs(x)),
                 "exact64")
    huber = np.where(abs(x) < 1, 0.5 * x ** 2, abs(x) - 0.5)
    assert_close(F.huber_loss(tx, tz, reduction="none", weight=tw).numpy(), w * huber,
                 "exact64")
    with pytest.raises(ValueError, match="same size"):
        F.mse_loss(tx, tz, weight=fg.ones(2))


def test_keyword_calls_against_torch():
    torch = pytest.importorskip("torch")
    for name, kwargs, _ in CALLS:
        tk = {k: (getattr(torch, str(v).rsplit(".", 1)[-1]) if isinstance(v, fg.dtype) else v)
              for k, v in kwargs.items()}
        theirs = getattr(torch, name)(torch.tensor(X), **tk).numpy()
        ours = getattr(fg, name)(fg.tensor(X), **kwargs).numpy()
        assert_close(ours, theirs, "f32" if ours.dtype == np.float32 else "exact64", name)
    import torch.nn.functional as TF

    rng = np.random.default_rng(1)
    logits, t = rng.standard_normal((6, 5)), rng.integers(0, 5, 6)
    w = rng.random(5)
    for kw in (dict(label_smoothing=0.2), dict(weight=w, label_smoothing=0.3),
               dict(reduction="none", label_smoothing=0.1, ignore_index=2)):
        tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        fkw = {k: fg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        assert_close(F.cross_entropy(fg.tensor(logits), fg.tensor(t), **fkw).numpy(),
                     TF.cross_entropy(torch.tensor(logits), torch.tensor(t), **tkw).numpy(),
                     "exact64", str(kw))
