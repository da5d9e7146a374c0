"""Stage embed@<dataset>: frozen-encoder embeddings of the dataset's rows, computed only for missing keys.

Text datasets: `embed.text_encoder` gives token states (text heads) and pooled vectors; every encoder in
`embed.encoders` of the dataset's modality gives pooled vectors for its probe. The output manifest lists
them all; image datasets with no encoder get an empty one."""
import sys
from pathlib import Path

from drift.config import cache_dir, load_params, paths, run_stage, write_json
from drift.encoders import get_encoder_spec, make_encoder
from drift.store import read_slice_manifest


def main(argv):
    name = argv[0]
    params = load_params()
    p = paths(name)
    modality = read_slice_manifest(p["slices"])["modality"]
    cfg = params.get("embed") or {}
    store = cache_dir(params)
    from drift.embed import embed_dataset, embed_pooled

    results = {}
    if modality == "text":
        results[cfg.get("text_encoder", "minilm-l6")] = embed_dataset(p["slices"], cfg, store)
    for encoder_name in cfg.get("encoders") or []:
        if get_encoder_spec(encoder_name).modality != modality or encoder_name in results:
            continue
        kwargs = {"max_length": cfg.get("max_length", 128)} if modality == "text" else {}
        encoder = make_encoder(encoder_name, batch_size=cfg.get("batch_size", 32), dtype=cfg.get("dtype", "float32"),
                               device=cfg.get("device") or None,
                               weights=(cfg.get("weights") or {}).get(encoder_name), **kwargs)
        results[encoder_name] = embed_pooled(p["slices"], encoder, store, modality,
                                             int(cfg.get("chunk_rows", 512)))
    write_json(p["embeddings"], {"encoders": {enc: manifest for enc, (manifest, _) in results.items()}})
    for enc, (manifest, metrics) in results.items():
        write_json(Path("metrics/embed") / f"{name}-{enc}.json", metrics)
        print(f"embed {name} with {enc}: {metrics['unique']} unique rows, {metrics['computed']} computed, "
              f"{metrics['cache_hits']} from the store {store / manifest['store']} ({metrics['seconds']:.1f} s)",
              file=sys.stderr)


if __name__ == "__main__":
    run_stage(main)
