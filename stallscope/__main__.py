"""``python -m stallscope`` runs the CLI."""

from stallscope.cli.main import main

if __name__ == "__main__":
    main()
