"""Reports: Markdown + self-contained HTML + JUnit XML over run directories, bundled, hashed and signed."""
