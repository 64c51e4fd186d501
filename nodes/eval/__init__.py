"""The evaluation DAG's node module: question files → gold → retrieval and answer records → metrics."""
