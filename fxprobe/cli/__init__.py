"""The click shell: argument parsing and exit codes only; the work lives in the library."""
