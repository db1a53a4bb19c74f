package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Files are the tokenizer files a Hugging Face model folder carries.
var Files = []string{"tokenizer.json", "tokenizer_config.json"}

// CopyFiles copies the tokenizer files from src to the folder dst (a
// checkpoint, an export, a model). tokenizer.json is required;
// tokenizer_config.json is copied when present.
func CopyFiles(src, dst string) error {
	for i, f := range Files {
		raw, err := os.ReadFile(filepath.Join(src, f))
		if errors.Is(err, os.ErrNotExist) && i > 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy tokenizer: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), raw, 0o644); err != nil {
			return fmt.Errorf("copy tokenizer: %w", err)
		}
	}
	return nil
}
