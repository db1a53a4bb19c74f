package cudaemu

// The __shared__ variables of each kernel, read from the kernels' object
// code. emu.h makes a __shared__ variable a thread_local static (one copy
// per worker thread), which leaves the runtime no way to name them; but
// the object file knows them: each is a TLS symbol of the unit's .tbss
// section, and the code of a kernel refers to the ones it uses by
// relocations (directly, or from the functions it calls). Build compiles
// kernel units with -ffunction-sections so that each function's
// relocations are its own, follows them from each kernel, and generates a
// table unit that registers, per kernel, its variables as offsets from an
// anchor: a thread_local the wrapper adds to the unit, which the linker
// places in the same .tbss as the unit's other variables, keeping their
// offsets. The runtime poisons those bytes before every block, and the
// total is the kernel's static shared memory, which ptxas limits to 48 KiB.

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// MaxStaticShared is ptxas's limit on a kernel's static shared memory.
const MaxStaticShared = 48 << 10

// sharedVar is one __shared__ variable of a kernel: its symbol, offset
// from its unit's anchor, and size.
type sharedVar struct {
	Sym    string
	Offset int64
	Size   uint64
}

// anchorName is the thread_local the wrapper of unit idx defines.
func anchorName(idx int) string { return fmt.Sprintf("emu_tls_anchor_u%03d", idx) }

// varName is the source name of a TLS symbol, for messages: a function's
// local static is _ZZ<function>E<length><name>.
func varName(sym string) string {
	if !strings.HasPrefix(sym, "_ZZ") {
		return sym
	}
	return strings.TrimLeft(sym[strings.LastIndexByte(sym, 'E')+1:], "0123456789")
}

// sharedVars lists, for each kernel of an object file, the TLS variables
// its code reaches (the anchor excluded), sorted by offset.
func sharedVars(obj string, kernels []kernelDecl, anchor string) (map[string][]sharedVar, error) {
	f, err := elf.Open(obj)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("%s: not a 64-bit ELF object", obj)
	}
	syms, err := f.Symbols() // syms[i] is symbol index i+1
	if err != nil {
		return nil, err
	}
	var anchorSym *elf.Symbol
	funcs := map[string]elf.SectionIndex{}
	for i := range syms {
		s := &syms[i]
		if s.Name == anchor && elf.ST_TYPE(s.Info) == elf.STT_TLS {
			anchorSym = s
		}
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
			funcs[s.Name] = s.Section
		}
	}
	if anchorSym == nil {
		return nil, fmt.Errorf("%s: no TLS anchor %s", obj, anchor)
	}
	tbss := anchorSym.Section
	// tlsAt finds the TLS variable of the anchor's section at offset off
	// (for a relocation against the section symbol).
	tlsAt := func(off int64) int {
		for i := range syms {
			s := &syms[i]
			if elf.ST_TYPE(s.Info) == elf.STT_TLS && s.Section == tbss && int64(s.Value) <= off && off < int64(s.Value+s.Size) {
				return i
			}
		}
		return -1
	}
	// Per section of code: the TLS symbols and the sections of code its
	// relocations refer to.
	tls := map[elf.SectionIndex]map[int]bool{}
	calls := map[elf.SectionIndex]map[elf.SectionIndex]bool{}
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_RELA {
			continue
		}
		target := elf.SectionIndex(sec.Info)
		if int(target) >= len(f.Sections) || f.Sections[target].Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		data, err := sec.Data()
		if err != nil {
			return nil, err
		}
		if tls[target] == nil {
			tls[target], calls[target] = map[int]bool{}, map[elf.SectionIndex]bool{}
		}
		for r := bytes.NewReader(data); r.Len() >= 24; {
			var rel elf.Rela64
			if err := binary.Read(r, f.ByteOrder, &rel); err != nil {
				return nil, err
			}
			si := int(elf.R_SYM64(rel.Info)) - 1
			if si < 0 || si >= len(syms) {
				continue
			}
			s := &syms[si]
			switch elf.ST_TYPE(s.Info) {
			case elf.STT_TLS:
				if s.Section != elf.SHN_UNDEF { // threadIdx and friends are the runtime's
					tls[target][si] = true
				}
			case elf.STT_SECTION:
				if s.Section == tbss {
					if i := tlsAt(rel.Addend); i >= 0 {
						tls[target][i] = true
					}
				} else if int(s.Section) < len(f.Sections) && f.Sections[s.Section].Flags&elf.SHF_EXECINSTR != 0 {
					calls[target][s.Section] = true
				}
			case elf.STT_FUNC:
				if s.Section != elf.SHN_UNDEF {
					calls[target][s.Section] = true
				}
			}
		}
	}
	out := map[string][]sharedVar{}
	for _, k := range kernels {
		start, ok := funcs[k.Name]
		if !ok {
			continue
		}
		seen := map[elf.SectionIndex]bool{start: true}
		todo := []elf.SectionIndex{start}
		used := map[int]bool{}
		for len(todo) > 0 {
			s := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for i := range tls[s] {
				used[i] = true
			}
			for c := range calls[s] {
				if !seen[c] {
					seen[c] = true
					todo = append(todo, c)
				}
			}
		}
		var vars []sharedVar
		for i := range used {
			s := &syms[i]
			if s.Name == anchor {
				continue
			}
			if s.Section != tbss {
				return nil, fmt.Errorf("kernel %s: __shared__ variable %s is not in the unit's .tbss (an initialiser? CUDA allows none)", k.Name, varName(s.Name))
			}
			vars = append(vars, sharedVar{Sym: s.Name, Offset: int64(s.Value) - int64(anchorSym.Value), Size: s.Size})
		}
		sort.Slice(vars, func(a, b int) bool { return vars[a].Offset < vars[b].Offset })
		if len(vars) > 0 {
			out[k.Name] = vars
		}
	}
	return out, nil
}

// sharedBytes is the static shared memory of a kernel's variables.
func sharedBytes(vars []sharedVar) uint64 {
	var n uint64
	for _, v := range vars {
		n += v.Size
	}
	return n
}

// checkShared fails, as ptxas does, for a kernel over MaxStaticShared.
func checkShared(unit string, shared map[string][]sharedVar) error {
	var errs []string
	names := make([]string, 0, len(shared))
	for k := range shared {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		vars := shared[k]
		if n := sharedBytes(vars); n > MaxStaticShared {
			var list []string
			for _, v := range vars {
				list = append(list, fmt.Sprintf("%s %d", varName(v.Sym), v.Size))
			}
			errs = append(errs, fmt.Sprintf("emu: %s: kernel %s uses too much shared data (%d bytes of __shared__ variables: %s; at most %d, as ptxas allows)",
				unit, k, n, strings.Join(list, ", "), MaxStaticShared))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// sharedTable is the generated unit registering every kernel's __shared__
// variables with the runtime: per unit index, its kernels' variables.
func sharedTable(units map[int]map[string][]sharedVar) []byte {
	var b bytes.Buffer
	b.WriteString("// Generated by gdrotrain internal/testinfra/cudaemu: each kernel's __shared__ variables, found in its object code.\n")
	b.WriteString("#include \"emu_abi.h\"\n")
	idxs := make([]int, 0, len(units))
	for i := range units {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	type entry struct {
		kernel, anchor, vars string
		n                    int
		bytes                uint64
	}
	var entries []entry
	for _, i := range idxs {
		if len(units[i]) == 0 {
			continue
		}
		a := anchorName(i)
		fmt.Fprintf(&b, "extern \"C\" __attribute__((visibility(\"hidden\"))) __thread char %s;\n", a)
		fmt.Fprintf(&b, "static char* %s_get() { return &%s; }\n", a, a)
		names := make([]string, 0, len(units[i]))
		for k := range units[i] {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			v := fmt.Sprintf("emu_vars_%d", len(entries))
			fmt.Fprintf(&b, "static const emu_shared_var %s[] = {", v)
			for _, sv := range units[i][k] {
				fmt.Fprintf(&b, "{%d, %d}, ", sv.Offset, sv.Size)
			}
			b.WriteString("};\n")
			entries = append(entries, entry{k, a + "_get", v, len(units[i][k]), sharedBytes(units[i][k])})
		}
	}
	if len(entries) == 0 {
		return b.Bytes()
	}
	b.WriteString("static const emu_kernel_shared emu_shared_kernels[] = {\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "\t{%q, %s, %s, %d, %d},\n", e.kernel, e.anchor, e.vars, e.n, e.bytes)
	}
	b.WriteString("};\nnamespace {\nstruct emu_shared_registrar {\n\temu_shared_registrar() {\n" +
		"\t\tfor (const emu_kernel_shared& k : emu_shared_kernels) emu_register_shared(&k);\n\t}\n} emu_shared_registrar_instance;\n}  // namespace\n")
	return b.Bytes()
}
