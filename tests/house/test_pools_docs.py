
from genenv_cli.rundir.schemas import SCHEMAS, markdown_tables
from paths import ROOT

DOC = ROOT / "docs" / "pools.md"


def test_docs_describe_every_file_and_column():
    """docs/pools.md carries the tables generated from SCHEMAS (regenerate: python -m genenv_cli.rundir.schemas)."""
    text = DOC.read_text()
    assert markdown_tables() in text
    for schema in SCHEMAS.values():
        for col in schema.columns:
            assert f"| `{col.name}` | {col.type} |" in text
