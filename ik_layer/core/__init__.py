"""What both solvers share and neither owns: the problem, the result, the options and the LM parameters."""
