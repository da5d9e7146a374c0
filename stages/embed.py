"""Stage embed@<dataset>: frozen-encoder embeddings of the dataset's rows, computed only for missing keys.

Text datasets: `embed.text_encoder` gives token states (text heads) and pooled vectors; every encoder in
`embed.encoders` of the dataset's modality gives pooled vectors for its probe. The output manifest lists
them all; image datasets with no encoder get an empty one."""
import sys
from pathlib import Path

from drift.config import cache_dir, load_params, paths, run_stage, write_json
from drift.encoders import get_encoder_spec
from drift.store import read_slice_manifest


def main(argv):
    name = argv[0]
    params = load_params()
    p = paths(name)
    modality = read_slice_manifest(p["slices"])["modality"]
    cfg = params.embed
    store = cache_dir(params)
    from drift.embed import embed_dataset, embed_encoder, embed_pooled

    results = {}
    if modality == "text":
        results[cfg.text_encoder] = embed_dataset(p["slices"], cfg, store)
    for encoder_name in cfg.encoders:
        if get_encoder_spec(encoder_name).modality != modality or encoder_name in results:
            continue
        encoder = embed_encoder(encoder_name, cfg)
        results[encoder_name] = embed_pooled(p["slices"], encoder, store, modality, cfg.chunk_rows)
    write_json(p["embeddings"], {"encoders": {enc: manifest for enc, (manifest, _) in results.items()}})
    for enc, (manifest, metrics) in results.items():
        write_json(Path("metrics/embed") / f"{name}-{enc}.json", metrics)
        print(f"embed {name} with {enc}: {metrics['unique']} unique rows, {metrics['computed']} computed, "
              f"{metrics['cache_hits']} from the store {store / manifest['store']} ({metrics['seconds']:.1f} s)",
              file=sys.stderr)


if __name__ == "__main__":
    run_stage(main)
