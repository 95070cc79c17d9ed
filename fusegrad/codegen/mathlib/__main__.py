"""``python -m fusegrad.codegen.mathlib``: the math library's speed table (see ``bench``)."""

from fusegrad.codegen.mathlib.bench import main

main()
