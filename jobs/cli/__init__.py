"""The `runoff` command line: parsing, one-line errors and exit codes, the warm driver.

Owns: the argument parser and command table (`main`), the library log file (`logs`), the
`runoff serve` server and its client (`server`, `client`), and the file spark-submit runs
(`submit`). Every command's work lives in the package that owns it; this package only dispatches.
May import every other part of `jobs`.
"""
