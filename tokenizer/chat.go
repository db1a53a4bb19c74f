package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Message is one chat turn, as in Hugging Face's messages list.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is an assistant turn's separate reasoning
	// (message.reasoning_content in the Qwen3 template); nil when absent.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// ChatOptions are apply_chat_template's arguments. The trainer uses
// {AddGenerationPrompt: true} and nothing else (docs/algorithm.md §2.3).
type ChatOptions struct {
	AddGenerationPrompt bool
	// EnableThinking is the template's enable_thinking variable; nil leaves it
	// undefined (the Qwen3 default), false appends an empty think block.
	EnableThinking *bool
}

// PromptMode chooses how a prompt's messages become text.
type PromptMode string

const (
	// PromptChat renders the messages with the checkpoint's chat template and
	// an open assistant turn, as verl does (docs/algorithm.md §2.3).
	PromptChat PromptMode = "chat"
	// PromptRaw uses the messages' contents as they are, joined by "\n\n"
	// (a single user message is its content), with no template.
	PromptRaw PromptMode = "raw"
)

// ParsePromptMode accepts "chat" and "raw".
func ParsePromptMode(s string) (PromptMode, error) {
	switch PromptMode(s) {
	case PromptChat, PromptRaw:
		return PromptMode(s), nil
	}
	return "", fmt.Errorf("prompt mode %q: want %q or %q", s, PromptChat, PromptRaw)
}

type templateKind int

const (
	templateNone   templateKind = iota // no chat_template in tokenizer_config.json
	templateQwen3                      // Qwen3's template, byte for byte
	templateChatML                     // another ChatML template: system/user turns only
	templateOther                      // not supported
)

// ErrNoChatTemplate is returned by ApplyChatTemplate when the tokenizer has
// no chat template it can render.
var ErrNoChatTemplate = errors.New("no supported chat template")

func classifyTemplate(tmpl string) templateKind {
	if tmpl == "" {
		return templateNone
	}
	sum := sha256.Sum256([]byte(tmpl))
	if hex.EncodeToString(sum[:]) == qwen3ChatTemplateSHA256 {
		return templateQwen3
	}
	// A ChatML template without a default system prompt renders system and
	// user turns plus the generation prompt identically to Qwen3's.
	if strings.Contains(tmpl, "<|im_start|>") && strings.Contains(tmpl, "<|im_end|>") &&
		strings.Contains(tmpl, "add_generation_prompt") && strings.Contains(tmpl, "<|im_start|>assistant\\n") &&
		!strings.Contains(tmpl, "You are") {
		return templateChatML
	}
	return templateOther
}

// ApplyChatTemplate renders messages as Hugging Face's
// apply_chat_template(messages, tokenize=False, add_generation_prompt=…,
// enable_thinking=…) does with the checkpoint's template.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, opts ChatOptions) (string, error) {
	if len(msgs) == 0 {
		return "", errors.New("chat template: no messages")
	}
	switch t.template {
	case templateQwen3:
		return renderQwen3(msgs, opts), nil
	case templateChatML:
		for i, m := range msgs {
			if m.Role != "system" && m.Role != "user" {
				return "", fmt.Errorf("chat template of %s: message %d has role %q; this ChatML template is verified for system and user turns only: %w",
					t.templateFile, i, m.Role, ErrNoChatTemplate)
			}
		}
		if opts.EnableThinking != nil {
			return "", fmt.Errorf("chat template of %s: enable_thinking is only supported for the Qwen3 template: %w", t.templateFile, ErrNoChatTemplate)
		}
		return renderQwen3(msgs, opts), nil
	case templateNone:
		return "", fmt.Errorf("chat template: %s has none (use raw prompts): %w", t.describeConfig(), ErrNoChatTemplate)
	default:
		return "", fmt.Errorf("chat template of %s is not the Qwen3 template (sha256 %s) nor a plain ChatML one; use raw prompts: %w",
			t.templateFile, qwen3ChatTemplateSHA256[:12], ErrNoChatTemplate)
	}
}

func (t *Tokenizer) describeConfig() string {
	if t.templateFile == "" {
		return "the tokenizer (loaded without tokenizer_config.json)"
	}
	return t.templateFile
}

// RenderPrompt turns a prompt's messages into the text the model sees.
func (t *Tokenizer) RenderPrompt(msgs []Message, mode PromptMode) (string, error) {
	switch mode {
	case PromptChat:
		return t.ApplyChatTemplate(msgs, ChatOptions{AddGenerationPrompt: true})
	case PromptRaw:
		parts := make([]string, len(msgs))
		for i, m := range msgs {
			parts[i] = m.Content
		}
		return strings.Join(parts, "\n\n"), nil
	}
	return "", fmt.Errorf("prompt mode %q: want %q or %q", mode, PromptChat, PromptRaw)
}

// EncodePrompt is RenderPrompt followed by Encode.
func (t *Tokenizer) EncodePrompt(msgs []Message, mode PromptMode) ([]int, error) {
	s, err := t.RenderPrompt(msgs, mode)
	if err != nil {
		return nil, err
	}
	return t.Encode(s), nil
}

// renderQwen3 is a transcription of Qwen3's chat template (see
// qwen3ChatTemplate) for messages without tools or tool calls.
func renderQwen3(msgs []Message, opts ChatOptions) string {
	var b strings.Builder
	if msgs[0].Role == "system" {
		b.WriteString("<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n")
	}
	// The last user query that is not a tool response (scanning backwards
	// while still "multi_step_tool").
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == "user" && !(strings.HasPrefix(m.Content, "<tool_response>") && strings.HasSuffix(m.Content, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		switch {
		case m.Role == "user" || (m.Role == "system" && i != 0):
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		case m.Role == "assistant":
			content := m.Content
			reasoning := ""
			if m.ReasoningContent != nil {
				reasoning = *m.ReasoningContent
			} else if strings.Contains(m.Content, "</think>") {
				parts := strings.Split(m.Content, "</think>")
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				before := strings.TrimRight(parts[0], "\n")
				th := strings.Split(before, "<think>")
				reasoning = strings.TrimLeft(th[len(th)-1], "\n")
			}
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				b.WriteString("<|im_start|>" + m.Role + "\n<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString("<|im_start|>" + m.Role + "\n" + content)
			}
			b.WriteString("<|im_end|>\n")
		case m.Role == "tool":
			if i == 0 || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n" + m.Content + "\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		}
	}
	if opts.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if opts.EnableThinking != nil && !*opts.EnableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String()
}
