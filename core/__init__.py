"""The small core every layer may import: configuration, errors, console, signals, locks and
dataset specs. It imports nothing of runoff's other packages."""
