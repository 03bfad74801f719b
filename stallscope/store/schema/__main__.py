"""``python -m stallscope.store.schema`` prints docs/schema.md."""

from stallscope.store.schema import to_markdown

print(to_markdown(), end="")
