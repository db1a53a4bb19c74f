// llama_logits: the logits llama.cpp computes for a token sequence, at every
// position, for scripts/check_references.py. Built inside the sid chroot
// against the llama.h of the installed libllama (libllama-dev), so the structs
// passed by value always match the library:
//
//   gcc -O2 -o llama_logits scripts/llama_logits.c -lllama -lggml -lggml-base
//   llama_logits MODEL.gguf 1,2,3 OUT.f32 [THREADS]
//
// OUT.f32 holds n_tokens × n_vocab float32 values (row-major, native byte
// order); stdout gets one line "n_tokens n_vocab". One batch, every position
// marked for output, KV cache in F32 and flash attention off: the f32 path,
// so that a difference from our logits is the model's and not storage rounding.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *data) {
	(void)data;
	if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: %s MODEL.gguf IDS OUT.f32 [THREADS]\n", argv[0]);
		return 2;
	}
	int threads = argc > 4 ? atoi(argv[4]) : 1;
	int cap = 1, n = 0;
	for (const char *p = argv[2]; *p; p++) cap += *p == ',';
	llama_token *ids = calloc(cap, sizeof *ids);
	for (char *s = strtok(argv[2], ","); s; s = strtok(NULL, ",")) ids[n++] = atoi(s);
	if (n == 0) {
		fprintf(stderr, "llama_logits: no token ids\n");
		return 2;
	}

	llama_log_set(quiet, NULL);
	ggml_backend_load_all();
	llama_backend_init();
	struct llama_model_params mp = llama_model_default_params();
	mp.n_gpu_layers = 0;
	struct llama_model *model = llama_model_load_from_file(argv[1], mp);
	if (!model) {
		fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
		return 1;
	}
	int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = n < 256 ? 256 : n;
	cp.n_batch = cp.n_ctx;
	cp.n_ubatch = cp.n_ctx;
	cp.n_seq_max = 1;
	cp.n_threads = threads;
	cp.n_threads_batch = threads;
	cp.type_k = GGML_TYPE_F32;
	cp.type_v = GGML_TYPE_F32;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	cp.no_perf = true;
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx) {
		fprintf(stderr, "llama_logits: cannot create a context\n");
		return 1;
	}

	struct llama_batch b = llama_batch_init(n, 0, 1);
	for (int i = 0; i < n; i++) {
		b.token[i] = ids[i];
		b.pos[i] = i;
		b.n_seq_id[i] = 1;
		b.seq_id[i][0] = 0;
		b.logits[i] = 1;
	}
	b.n_tokens = n;
	int rc = llama_decode(ctx, b);
	if (rc != 0) {
		fprintf(stderr, "llama_logits: llama_decode returned %d\n", rc);
		return 1;
	}
	FILE *f = fopen(argv[3], "wb");
	if (!f) {
		perror(argv[3]);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		const float *row = llama_get_logits_ith(ctx, i);
		if (!row || fwrite(row, sizeof(float), n_vocab, f) != (size_t)n_vocab) {
			fprintf(stderr, "llama_logits: no logits for position %d\n", i);
			return 1;
		}
	}
	if (fclose(f) != 0) {
		perror(argv[3]);
		return 1;
	}
	printf("%d %d\n", n, n_vocab);
	llama_batch_free(b);
	llama_free(ctx);
	llama_model_free(model);
	llama_backend_free();
	free(ids);
	return 0;
}
