"""IR -> IR passes: autodiff (vjp and its rules), simplification."""
