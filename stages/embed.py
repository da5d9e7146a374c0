"""Stage embed@<dataset>: frozen-encoder embeddings of the dataset's rows, computed only for missing keys.

Image datasets have no encoder in this run: the manifest says so and nothing is computed."""
from pathlib import Path

from drift.config import cache_dir, load_params, paths, run_stage, write_json
from drift.store import read_slice_manifest


def main(argv):
    name = argv[0]
    params = load_params()
    p = paths(name)
    manifest = read_slice_manifest(p["slices"])
    if manifest["modality"] != "text":
        write_json(p["embeddings"], {"encoder": None})
        return
    from drift.embed import embed_dataset

    cfg = params.get("embed") or {}
    embeddings, metrics = embed_dataset(p["slices"], cfg, cache_dir(params))
    write_json(p["embeddings"], embeddings)
    write_json(Path("metrics/embed") / f"{name}-{embeddings['encoder']}.json", metrics)


if __name__ == "__main__":
    run_stage(main)
