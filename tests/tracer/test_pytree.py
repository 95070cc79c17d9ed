"""Pytrees: flatten/unflatten round trips, TreeDef identity, tree_map, grad over pytrees."""

from __future__ import annotations

import collections
import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.tree import TreeDef, tree_flatten, tree_map, tree_structure, tree_unflatten
from tests.helpers import assert_close


class Params(NamedTuple):
    w: object
    b: object


@dataclasses.dataclass
class Layer:
    w: object
    b: object


class Box:
    """A user class made a pytree with ``fg.tree.register``; ``tag`` is static aux data."""

    def __init__(self, a, b, tag: str):
        self.a, self.b, self.tag = a, b, tag

    def __eq__(self, other):
        return (type(other) is Box and (self.a, self.b, self.tag) == (other.a, other.b, other.tag))

    __hash__ = None


fg.tree.register(Box, lambda box: ((box.a, box.b), box.tag), lambda tag, ch: Box(*ch, tag))


# (tree, its leaves in flattening order)
TREES = {
    "leaf": (1.5, [1.5]),
    "tuple": ((1, 2, 3), [1, 2, 3]),
    "list": ([1, [2, 3]], [1, 2, 3]),
    "dict": ({"a": 1, "b": 2}, [1, 2]),
    "namedtuple": (Params(1, 2), [1, 2]),
    "dataclass": (Layer(1, 2), [1, 2]),
    "none": (None, []),
    "none_inside": ((1, None, [None, 2]), [1, 2]),
    "empty": (((), [], {}), []),
    "registered": (Box(1, [2, 3], "t"), [1, 2, 3]),
    "nested": (
        {"p": Params(w=[1, (2,)], b=Layer(3, None)), "q": Box({"k": 4}, 5, "u"), "r": ()},
        [1, 2, 3, 4, 5],
    ),
}


@pytest.mark.parametrize("name", TREES)
def test_flatten_unflatten_round_trip(name):
    tree, leaves = TREES[name]
    got, td = tree_flatten(tree)
    assert got == leaves
    assert td.num_leaves == len(leaves)
    back = tree_unflatten(td, got)
    assert back == tree
    assert type(back) is type(tree)


def test_unflatten_rebuilds_with_new_leaves_and_types():
    tree = {"p": Params(1, Layer(2, 3)), "l": [4, (5,)]}
    leaves, td = tree_flatten(tree)
    out = tree_unflatten(td, [x * 10 for x in leaves])
    assert out == {"p": Params(10, Layer(20, 30)), "l": [40, (50,)]}
    assert isinstance(out["p"], Params) and isinstance(out["p"].b, Layer)
    assert isinstance(out["l"], list) and isinstance(out["l"][1], tuple)


def test_arrays_and_tensortypes_are_leaves():
    a = np.zeros((2, 3))
    t = fg.TensorType((2,), np.float64)
    leaves, td = tree_flatten((a, t))
    assert leaves[0] is a and leaves[1] is t
    assert td.num_leaves == 2


def test_registered_aux_data_round_trips():
    leaves, td = tree_flatten(Box(1, 2, "static"))
    assert leaves == [1, 2]
    assert tree_unflatten(td, [7, 8]) == Box(7, 8, "static")
    assert td != tree_structure(Box(1, 2, "other"))


def test_unflatten_with_too_many_leaves_raises():
    _, td = tree_flatten((1, 2))
    with pytest.raises(ValueError, match="too many leaves"):
        tree_unflatten(td, [1, 2, 3])


@pytest.mark.parametrize("name", TREES)
def test_treedef_equal_and_hashable_for_equal_structures(name):
    tree, leaves = TREES[name]
    other = tree_unflatten(tree_structure(tree), [object() for _ in leaves])
    a, b = tree_structure(tree), tree_structure(other)
    assert isinstance(a, TreeDef)
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1


@pytest.mark.parametrize(
    "t1, t2",
    [
        ((1, 2), [1, 2]),
        ((1, 2), (1, 2, 3)),
        ((1, (2,)), (1, 2)),
        ({"a": 1}, {"b": 1}),
        (Params(1, 2), (1, 2)),
        (Layer(1, 2), Params(1, 2)),
        (None, (None,)),
        (Box(1, 2, "t"), Box(1, 2, "u")),
    ],
)
def test_treedef_differs_for_different_structures(t1, t2):
    assert tree_structure(t1) != tree_structure(t2)


def test_tree_map_several_trees():
    a = {"x": (1, 2), "y": Params(3, [4])}
    b = {"x": (10, 20), "y": Params(30, [40])}
    c = {"x": (100, 200), "y": Params(300, [400])}
    out = tree_map(lambda p, q, r: p + q + r, a, b, c)
    assert out == {"x": (111, 222), "y": Params(333, [444])}
    assert isinstance(out["y"], Params)


def test_tree_map_structure_mismatch_raises():
    with pytest.raises(ValueError, match="structures differ"):
        tree_map(lambda p, q: p + q, (1, 2), [1, 2])


def test_dict_structure_independent_of_insertion_order():
    # as in JAX, dict children are ordered by sorted key; the dict built keeps its key order
    assert tree_structure({"a": 1, "b": 2}) == tree_structure({"b": 2, "a": 1})
    assert tree_flatten({"b": 1, "a": 2})[0] == [2, 1]
    out = tree_map(lambda p, q: p + q, {"b": 2, "a": 1}, {"a": 10, "b": 20})
    assert out == {"a": 11, "b": 22} and list(out) == ["b", "a"]


def test_ordered_dict_is_a_container():
    od = collections.OrderedDict([("w", np.ones(2)), ("b", np.zeros(1))])
    leaves, td = tree_flatten(od)
    assert len(leaves) == 2
    assert tree_unflatten(td, leaves) == od
    g = fg.grad(lambda p: fnp.sum(p["w"] ** 2) + fnp.sum(p["b"]))(od)
    assert isinstance(g, collections.OrderedDict)


@dataclasses.dataclass
class WithDerived:
    a: object
    total: object = dataclasses.field(init=False, default=None)


def test_dataclass_with_init_false_field_round_trips():
    tree = WithDerived(1.0)
    leaves, td = tree_flatten(tree)
    assert tree_unflatten(td, leaves) == tree


# --- grad over pytree arguments ---------------------------------------------------

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 3))
W = RNG.standard_normal((3, 2))
B = RNG.standard_normal(2)


def _loss(w, b):
    return fnp.sum(fnp.tanh(X @ w + b) ** 2)


def _reference_grads(w, b):
    """Hand-derived gradient of ``_loss``."""
    t = np.tanh(X @ w + b)
    d = 2 * t * (1 - t * t)
    return X.T @ d, d.sum(axis=0)


GW, GB = _reference_grads(W, B)


def test_grad_dict_params():
    g = fg.grad(lambda p: _loss(p["w"], p["b"]))({"w": W, "b": B})
    assert type(g) is dict and list(g) == ["w", "b"]
    assert_close(g["w"], GW, "exact64")
    assert_close(g["b"], GB, "exact64")


def test_grad_namedtuple_params():
    g = fg.grad(lambda p: _loss(p.w, p.b))(Params(W, B))
    assert type(g) is Params
    assert_close(g.w, GW, "exact64")
    assert_close(g.b, GB, "exact64")


def test_grad_dataclass_params():
    g = fg.grad(lambda p: _loss(p.w, p.b))(Layer(W, B))
    assert type(g) is Layer
    assert_close(g.w, GW, "exact64")
    assert_close(g.b, GB, "exact64")


def test_grad_registered_class_params():
    g = fg.grad(lambda p: _loss(p.a, p.b))(Box(W, B, "tag"))
    assert type(g) is Box and g.tag == "tag"
    assert_close(g.a, GW, "exact64")
    assert_close(g.b, GB, "exact64")


def test_grad_nested_pytree_and_argnums():
    params = {"layers": [Params(W, B)], "scale": np.float64(2.0)}

    def loss(p, x):
        layer = p["layers"][0]
        return p["scale"] * fnp.sum(fnp.tanh(x @ layer.w + layer.b) ** 2)

    gp, gx = fg.grad(loss, argnums=(0, 1))(params, X)
    assert tree_structure(gp) == tree_structure(params)
    assert isinstance(gp["layers"], list) and type(gp["layers"][0]) is Params
    assert_close(gp["layers"][0].w, 2.0 * GW, "exact64")
    assert_close(gp["layers"][0].b, 2.0 * GB, "exact64")
    assert_close(gp["scale"], _loss(W, B), "exact64")
    t = np.tanh(X @ W + B)
    assert_close(gx, 2.0 * (2 * t * (1 - t * t)) @ W.T, "exact64")


def test_grad_pytree_output_with_has_aux():
    def loss(p):
        value = _loss(p["w"], p["b"])
        return value, {"value": value, "w_sum": fnp.sum(p["w"])}

    g, aux = fg.grad(loss, has_aux=True)({"w": W, "b": B})
    assert_close(g["w"], GW, "exact64")
    assert sorted(aux) == ["value", "w_sum"]
    assert_close(aux["w_sum"], W.sum(), "exact64")
