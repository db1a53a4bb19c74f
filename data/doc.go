// Package data reads prompt datasets and serves them to the trainer.
//
// Formats (ReadFile picks by extension, then by the columns of each row):
//
//   - verl rows, in Parquet (as written by pyarrow / Hugging Face datasets) or
//     JSONL: prompt (a list of {role, content} chat messages, or a plain
//     string), reward_model.ground_truth, data_source, ability and
//     extra_info.{index, split}. The prompt is used as it is: the verl
//     preprocessor already applied the templates.
//   - simple rows, JSONL: {problem, answer} with optional id, source and
//     choices (the files in shared/data). The question is the first present
//     of question/problem/input/prompt/instruction/query/stem and the answer
//     the first of final_answer/answer/solution/output/response/label (a list
//     gives its first element; numbers lose a trailing ".0"), as the
//     reference's benchmark builder does (docs/algorithm.md §2.5). GroundTruth (truth.go)
//     does this for both row kinds, and `gdrotrain verify` uses it too. The prompt template is
//     chosen per row (Template): GPQA when it has choices, the DAPO training
//     template when its source names DAPO, the math benchmark template
//     otherwise (templates.go, verbatim from docs/algorithm.md §2.2 and §2.5).
//
// Every prompt gets a stable UID (uid.go): an explicit uid column; else
// data_source:split:index from extra_info.index (the reference's form,
// docs/algorithm.md §2.4); else the row's id; else a hash of its content. A dataset whose UIDs
// collide is refused: GRPO groups rollouts and the difficulty classifier keeps
// history by UID.
//
// A bad row is an error naming the file and the row (RowError), or, with
// ReadOptions.SkipBadRows, is skipped, counted in Dataset.Skipped and logged;
// never dropped silently.
//
// Loader (loader.go) serves batches in a deterministic per-epoch permutation
// derived from a seed and the epoch number only, with drop_last, and its
// Cursor (a small JSON-serializable struct) resumes the exact sequence from a
// checkpoint. PromptLengths / FilterByLength (length.go) render and tokenize
// prompts and report or drop those over the prompt-length limit with counts.
package data
