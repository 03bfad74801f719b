#!/bin/sh
# Rewrite the demo bundles in this folder, byte for byte (see README.md).
cd "$(dirname "$0")/.." && exec python -m stallscope.samples demo --out samples
