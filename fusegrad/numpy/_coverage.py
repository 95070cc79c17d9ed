"""What ``fusegrad.numpy`` added beyond its original subset, and how each behaves.

One entry per function: ``name -> (differentiable, note)``; "differentiable" means
reverse and forward mode, also under ``vmap`` and compiled. Read by the tests
(every name has cases) and by the documentation's coverage table.
"""

from __future__ import annotations

ADDED: dict[str, tuple[bool, str]] = {
    # lists of traced values, einsum, concatenation
    "array": (True, "nested lists/tuples of traced values, arrays and numbers are stacked"),
    "asarray": (True, "as array"),
    "einsum": (True, "also the sublist form einsum(a, [0, 1], b, [1, 2], [0, 2]) and ... "
                     "broadcasting between operands of different rank"),
    "concatenate": (True, "operands of different dtypes are promoted as in NumPy (so are "
                          "stack, hstack, vstack, column_stack)"),
    "full": (True, "a traced fill value gives a traced array"),
    "full_like": (True, "a traced fill value gives a traced array"),
    # sorting and searching
    "sort": (True, "gradient flows back through the (stable) sorting permutation"),
    "argsort": (False, "stable, NaNs last; the argsort primitive"),
    "take_along_axis": (True, "one gather of the flattened array"),
    "partition": (True, "returns the fully sorted array (a valid partition)"),
    "argpartition": (False, "returns the stable sort permutation (a valid partition)"),
    "searchsorted": (False, "traced operands: comparison counts, O(len(a) * v.size)"),
    # elementwise
    "deg2rad": (True, ""), "rad2deg": (True, ""), "degrees": (True, ""), "radians": (True, ""),
    "hypot": (True, "overflow-free; gradient 0 at (0, 0) (a subgradient)"),
    "sinc": (True, "Taylor series near 0: sinc'(0) = 0, sinc''(0) = -pi**2/3 exactly"),
    "logaddexp2": (True, "smooth to every order at ties"),
    "fmax": (True, "NaN-ignoring"), "fmin": (True, "NaN-ignoring"),
    "nan_to_num": (True, "gradient passes where the input is finite"),
    "isclose": (False, "concrete: NumPy's array; traced: a traced boolean array"),
    "allclose": (False, "concrete: a Python bool; traced: a traced 0-d boolean"),
    "nansum": (True, "NaNs count as 0"), "nanmean": (True, "mean of the non-NaN entries"),
    "nanmax": (True, "NaN where every entry is NaN"), "nanmin": (True, "as nanmax"),
    # array manipulation
    "tril": (True, ""), "triu": (True, ""), "diag": (True, "both directions, k="),
    "diagonal": (True, "offset, axis1, axis2"), "trace": (True, "offset, axis1, axis2"),
    "roll": (True, "shift/axis tuples"), "append": (True, ""),
    "fliplr": (True, ""), "flipud": (True, ""), "rot90": (True, "k, axes"),
    "array_split": (True, "unequal sections"), "hsplit": (True, ""), "vsplit": (True, ""),
    "dsplit": (True, ""), "atleast_3d": (True, ""), "column_stack": (True, ""),
    "r_": (True, "arrays, scalars, lists, slices (a:b:step, a:b:nj), an axis directive"),
    "c_": (True, "as r_, vectors become columns"),
    "pad": (True, "modes constant, edge, reflect, symmetric, wrap"),
    "meshgrid": (True, "indexing xy/ij, sparse"), "kron": (True, ""),
    "select": (True, "first true condition wins"),
    "where": (False, "one argument: concrete conditions only (index arrays); a traced "
                     "condition raises naming the three-argument form"),
    # calculus
    "cumprod": (True, "prefix products: exact gradient at zeros, every order"),
    "diff": (True, "n, axis, prepend, append"),
    "gradient": (True, "scalar spacings, edge_order 1 or 2"),
    "interp": (True, "in x and fp; xp concrete"),
    "cross": (True, "3- and 2-vectors, axisa/axisb/axisc/axis"),
    # more elementwise, shape and creation functions
    "fabs": (True, "real input (integers -> float64); complex raises as in NumPy"),
    "rollaxis": (True, ""),
    "real_if_close": (True, "tol; the choice of result reads the values, so under fg.jit "
                            "a complex traced input raises (fg.grad on arrays decides it)"),
    "linspace": (True, "traced or array start/stop (axis, endpoint, retstep, dtype)"),
}

#: NumPy calls that cannot reach fusegrad: NumPy converts their list argument itself
#: (its dispatch looks at the list, not at the traced values inside), so they raise
#: a TracerError that names the fusegrad.numpy function to call instead.
NOT_INTERCEPTABLE = (
    "np.array([x, ...])", "np.asarray([x, ...])", "np.mean([x, ...])", "np.sum([x, ...])",
    "np.std([x, ...])", "np.var([x, ...])", "np.linalg.norm([x, ...])", "np.full(shape, x)",
    "np.full_like(concrete, x)",
)
