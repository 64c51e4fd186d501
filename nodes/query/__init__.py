"""The ask DAG's node modules: the LLM connection, routing, the book flow (hits → ranked →
evidence), answers and cross-source fusion."""
