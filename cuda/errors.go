package cuda

import "fmt"

// Error is a failed CUDA, NVRTC or cuBLAS call: the call, its status code
// and the library's name and description for it.
type Error struct {
	Call string
	Code int
	Name string
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("%s: %s (%d: %s)", e.Call, e.Name, e.Code, e.Msg)
	}
	return fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code)
}
