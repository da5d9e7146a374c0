"""Stage embed@<dataset>: frozen-encoder embeddings of the dataset's rows, computed only for missing keys
(drift/encoders/embed.py `embed_all`). The output manifest lists every encoder's store table;
.drift/runs/embed/ counts the rows computed and found in the store; data/features/<dataset>/ holds the inputs
as memory-mappable files."""

from drift.core.interrupt import exit_on_interrupt, stage_name

exit_on_interrupt(stage_name())  # first: a Ctrl-C while the imports below load is one line too

from drift.core.environment import configured_cpu_path, use_cpu_path

use_cpu_path(configured_cpu_path())  # compute.cpu_path, before numpy and torch load (they read it once)

import sys

from drift.core.objectstore import check_store
from drift.core.params import load_params
from drift.core.stage import require, run_stage, write_run
from drift.encoders.embed import embed_all
from drift.store.cells import corrupt_line
from drift.store.embeddings import DamagedRows, EmbeddingsManifest, discard_fragments
from drift.store.features import write_features
from drift.store.location import cache_dir
from drift.store.slices import read_slice_manifest


def main(argv: list[str]) -> None:
    name = argv[0]
    params = load_params(dataset=name)  # train and embed as this dataset's section overrides them
    p = require(name, "slice_manifest")
    store = cache_dir(params.embed)
    check_store(store)  # on object storage: endpoint, credentials and bucket, one line each
    modality = read_slice_manifest(p["slices"]).modality
    corrupt: list[str] = []
    for attempt in (0, 1):
        # rows the store lacks that pulled feature files hold (same fingerprint, verified) fill it first,
        # uncomputed
        results = embed_all(
            p["slices"], modality, params.embed, store, params.compute, seed_from=p["features"]
        )
        manifests = {enc: manifest for enc, (manifest, _) in results.items()}
        EmbeddingsManifest(encoders=manifests).to_file(p["embeddings"])
        # the model inputs as files train and evaluate read batch by batch (rebuilt only when rows or store
        # change)
        try:
            write_features(p["slices"], manifests, store, p["features"], modality)
            break
        except DamagedRows as e:  # a miss: those rows' fragments are discarded and computed again, once
            if attempt:
                raise
            discard_fragments(e.path, set(e.damaged.values()))
            corrupt += [f"{e.path.name} key {key}" for key in e.damaged]
    if line := corrupt_line(f"embed@{name}", corrupt, "store row(s)"):
        print(line, file=sys.stderr)
    for enc, (manifest, metrics) in results.items():
        write_run("embed", f"{name}-{enc}.json", metrics.model_copy(update={"corrupt": len(corrupt)}))
        print(
            f"embed {name} with {enc}: {metrics.unique} unique rows, {metrics.computed} computed, "
            f"{metrics.cache_hits} from the store {store / manifest.store} ({metrics.seeded} of them filled "
            f"from pulled feature files; {metrics.seconds:.1f} s)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    run_stage(main)
