// emu_nvrtc.cc: a stand-in for NVRTC. The kernels are compiled into the
// emulator ahead of time, so "compiling" keeps the source: PTX and CUBIN are
// the source text after one line naming the target (kImageTag), which the
// emulator's cuModuleLoadData checks against the device. Which NVRTC it
// models is GDROTRAIN_EMU_NVRTC_VERSION (read at every call): 13.0 (the
// default) or 12.5, whose version and list of architectures
// (nvrtcGetSupportedArchs) it reports; --gpu-architecture must name one of
// them (sm_XY, or compute_XY for PTX only, as NVRTC's CUBIN of a virtual
// architecture is empty), or compilation fails with
// NVRTC_ERROR_INVALID_OPTION as NVRTC's does. Compilation also fails like
// NVRTC's would, with NVRTC_ERROR_COMPILATION and a log:
//   - on an #error directive (always, without running anything);
//   - on any error g++ finds checking the source with emu.h (g++
//     -fsyntax-only, with the program's headers and its -D, -U and -I
//     options), when g++ is on PATH and the emulator's build folder is next
//     to the library. GDROTRAIN_EMU_NVRTC_CHECK=0 turns this check off.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

#include "emu_internal.h"

namespace emu {
namespace {

enum {
	NVRTC_SUCCESS = 0,
	NVRTC_ERROR_OUT_OF_MEMORY = 1,
	NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
	NVRTC_ERROR_INVALID_INPUT = 3,
	NVRTC_ERROR_INVALID_PROGRAM = 4,
	NVRTC_ERROR_INVALID_OPTION = 5,
	NVRTC_ERROR_COMPILATION = 6,
};

const char* const kNames[] = {
	"NVRTC_SUCCESS",
	"NVRTC_ERROR_OUT_OF_MEMORY",
	"NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	"NVRTC_ERROR_INVALID_INPUT",
	"NVRTC_ERROR_INVALID_PROGRAM",
	"NVRTC_ERROR_INVALID_OPTION",
	"NVRTC_ERROR_COMPILATION",
	"NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	"NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	"NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	"NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	"NVRTC_ERROR_INTERNAL_ERROR",
	"NVRTC_ERROR_TIME_LIMIT_EXCEEDED",
};

struct Program {
	std::string src, name, log;
	std::string target;  // what the last successful compilation was for: "sm_90a", "compute_90"
	bool virt = false;   // target is a virtual architecture: no CUBIN
	std::vector<std::pair<std::string, std::string>> headers;  // include name, text
	bool compiled = false;
};
std::set<Program*> g_programs;

// error_lines returns NVRTC-style diagnostics for every #error directive.
std::string error_lines(const Program& p) {
	std::ostringstream log;
	std::istringstream in(p.src);
	std::string line;
	int n = 0, errors = 0;
	while (std::getline(in, line)) {
		n++;
		size_t i = line.find_first_not_of(" \t");
		if (i == std::string::npos || line[i] != '#') continue;
		i = line.find_first_not_of(" \t", i + 1);
		if (i == std::string::npos || line.compare(i, 5, "error") != 0) continue;
		size_t j = line.find_first_not_of(" \t", i + 5);
		log << p.name << "(" << n << "): catastrophic error: #error directive: "
		    << (j == std::string::npos ? "" : line.substr(j)) << "\n  " << line << "\n";
		errors++;
	}
	if (errors) log << "\n" << errors << " catastrophic error" << (errors > 1 ? "s" : "")
	                << " detected in the compilation of \"" << p.name << "\".\nCompilation terminated.\n";
	return log.str();
}

// build_dir is the folder holding emu.h, next to this library, or "".
std::string build_dir() {
	Dl_info info;
	if (!dladdr((void*)&error_lines, &info) || !info.dli_fname) return "";
	std::string lib = info.dli_fname;
	size_t slash = lib.rfind('/');
	std::string dir = (slash == std::string::npos ? std::string(".") : lib.substr(0, slash)) + "/emu-build";
	struct stat st;
	return stat((dir + "/emu.h").c_str(), &st) == 0 ? dir : "";
}

bool write_file(const std::string& path, const std::string& text) {
	FILE* f = fopen(path.c_str(), "wb");
	if (!f) return false;
	bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
	return fclose(f) == 0 && ok;
}

// syntax_check runs g++ -fsyntax-only on the program; it returns false and
// sets log when g++ reports errors. Without g++ or emu.h it passes.
bool syntax_check(const std::string& name, const std::string& src,
                  const std::vector<std::pair<std::string, std::string>>& headers,
                  const std::vector<std::string>& options, std::string* log) {
	if (env_u64("GDROTRAIN_EMU_NVRTC_CHECK", 1) == 0) return true;
	std::string inc = build_dir();
	if (inc.empty()) return true;
	char tmpl[] = "/tmp/gdrotrain-nvrtc-XXXXXX";
	if (!mkdtemp(tmpl)) return true;
	std::string tmp = tmpl;
	std::vector<std::string> files;
	std::string file = tmp + "/program.cc", line_name;
	for (char c : name) {
		if (c == '"' || c == '\\') line_name += '\\';
		line_name += c;
	}
	bool ok = write_file(file, "#line 1 \"" + line_name + "\"\n" + src + "\n");
	files.push_back(file);
	for (auto& h : headers) {
		if (h.first.empty() || h.first.find("..") != std::string::npos || h.first[0] == '/' ||
		    h.first.find('/') != std::string::npos)
			continue;
		files.push_back(tmp + "/" + h.first);
		ok = ok && write_file(files.back(), h.second);
	}
	std::vector<std::string> args = {"g++", "-fsyntax-only", "-std=c++17", "-x", "c++", "-include", inc + "/emu.h",
	                                 "-I" + inc, "-I" + tmp};
	for (const std::string& o : options) {
		static const char* const kMap[][2] = {{"-D", "-D"}, {"--define-macro=", "-D"}, {"-U", "-U"},
		                                      {"--undefine-macro=", "-U"}, {"-I", "-I"}, {"--include-path=", "-I"}};
		for (auto& m : kMap) {
			size_t n = strlen(m[0]);
			if (o.compare(0, n, m[0]) == 0 && o.size() > n) {
				args.push_back(m[1] + o.substr(n));
				break;
			}
		}
	}
	args.push_back(file);
	std::string out;
	int pipefd[2];
	if (ok && pipe2(pipefd, O_CLOEXEC) == 0) {
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
		posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
		posix_spawnattr_t attr;
		posix_spawnattr_init(&attr);
		sigset_t none;
		sigemptyset(&none);
		posix_spawnattr_setsigmask(&attr, &none);
		posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
		std::vector<char*> argv;
		for (auto& a : args) argv.push_back(&a[0]);
		argv.push_back(nullptr);
		pid_t pid;
		int rc = posix_spawnp(&pid, "g++", &fa, &attr, argv.data(), environ);
		close(pipefd[1]);
		if (rc == 0) {
			char buf[4096];
			ssize_t n;
			while ((n = read(pipefd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
				if (n > 0) out.append(buf, (size_t)n);
			int status = 0;
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
			}
			if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
				*log = out + "\n(checked by the gdrotrain CUDA emulator with g++ -fsyntax-only and emu.h)\n";
				ok = false;
			} else {
				ok = true;
			}
		} else {
			ok = true;  // no g++: nothing to check with
		}
		close(pipefd[0]);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&attr);
	} else {
		ok = true;
	}
	for (auto& f : files) unlink(f.c_str());
	rmdir(tmp.c_str());
	return ok;
}

// NVRTCModel is one NVRTC release: its version, the architectures
// nvrtcGetSupportedArchs lists and the target without --gpu-architecture.
struct NVRTCModel {
	int major, minor;
	std::vector<int> archs;
	const char* dflt;
};

// model is the NVRTC GDROTRAIN_EMU_NVRTC_VERSION names (13.0 when unset),
// or nullptr for one the emulator does not model.
const NVRTCModel* model() {
	static const NVRTCModel k13 = {13, 0, {75, 80, 86, 87, 89, 90, 100, 103, 120}, "compute_75"};
	static const NVRTCModel k125 = {12, 5, {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90}, "compute_52"};
	const char* v = getenv("GDROTRAIN_EMU_NVRTC_VERSION");
	if (!v || !*v || strcmp(v, "13.0") == 0) return &k13;
	if (strcmp(v, "12.5") == 0) return &k125;
	return nullptr;
}

// arch_option finds --gpu-architecture=X (or -arch=X) among the options and
// checks X against the model: "" and a log line when X is not one it knows.
// The architecture-specific suffix a exists from sm_90 on.
std::string arch_option(const NVRTCModel& m, const std::vector<std::string>& opts, std::string* log) {
	std::string arch = m.dflt;
	for (const std::string& o : opts)
		for (const char* prefix : {"--gpu-architecture=", "-arch="})
			if (o.compare(0, strlen(prefix), prefix) == 0) arch = o.substr(strlen(prefix));
	Target t;
	bool known = parse_target(arch, &t) && (!t.specific || t.cc >= 90);
	if (known) {
		known = false;
		for (int a : m.archs) known = known || a == t.cc;
	}
	if (!known) {
		*log = "nvrtc: error: invalid value for --gpu-architecture (-arch)\n";
		return "";
	}
	return arch;
}

Program* get(void* prog) {
	Program* p = (Program*)prog;
	return g_programs.count(p) ? p : nullptr;
}

}  // namespace
}  // namespace emu

using namespace emu;

#define LOCK std::lock_guard<std::mutex> lock_(api_mutex())

EMU_API int nvrtcVersion(int* major, int* minor) {
	if (!major || !minor) return NVRTC_ERROR_INVALID_INPUT;
	const NVRTCModel* m = model();
	if (!m) return NVRTC_ERROR_INVALID_INPUT;
	*major = m->major;
	*minor = m->minor;
	return NVRTC_SUCCESS;
}

EMU_API const char* nvrtcGetErrorString(int result) {
	if (result >= 0 && result < (int)(sizeof kNames / sizeof kNames[0])) return kNames[result];
	return "NVRTC_ERROR unknown";
}

EMU_API int nvrtcGetNumSupportedArchs(int* n) {
	const NVRTCModel* m = model();
	if (!n || !m) return NVRTC_ERROR_INVALID_INPUT;
	*n = (int)m->archs.size();
	return NVRTC_SUCCESS;
}

EMU_API int nvrtcGetSupportedArchs(int* archs) {
	const NVRTCModel* m = model();
	if (!archs || !m) return NVRTC_ERROR_INVALID_INPUT;
	memcpy(archs, m->archs.data(), m->archs.size() * sizeof(int));
	return NVRTC_SUCCESS;
}

EMU_API int nvrtcCreateProgram(void** prog, const char* src, const char* name, int numHeaders,
                               const char* const* headers, const char* const* includeNames) {
	LOCK;
	if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
	if (!src || numHeaders < 0 || (numHeaders > 0 && (!headers || !includeNames))) return NVRTC_ERROR_INVALID_INPUT;
	Program* p = new Program();
	p->src = src;
	p->name = name ? name : "default_program";
	for (int i = 0; i < numHeaders; i++)
		if (includeNames[i] && headers[i]) p->headers.emplace_back(includeNames[i], headers[i]);
	g_programs.insert(p);
	*prog = p;
	return NVRTC_SUCCESS;
}

EMU_API int nvrtcDestroyProgram(void** prog) {
	LOCK;
	if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
	Program* p = get(*prog);
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	g_programs.erase(p);
	delete p;
	*prog = nullptr;
	return NVRTC_SUCCESS;
}

EMU_API int nvrtcCompileProgram(void* prog, int numOptions, const char* const* options) {
	std::unique_lock<std::mutex> lock(api_mutex());
	Program* p = get(prog);
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	if (numOptions < 0 || (numOptions > 0 && !options)) return NVRTC_ERROR_INVALID_INPUT;
	std::vector<std::string> opts;
	for (int i = 0; i < numOptions; i++) {
		if (!options[i]) return NVRTC_ERROR_INVALID_INPUT;
		opts.push_back(options[i]);
	}
	p->compiled = false;
	const NVRTCModel* m = model();
	if (!m) {
		p->log = "gdrotrain CUDA emulator: GDROTRAIN_EMU_NVRTC_VERSION: want 13.0 or 12.5\n";
		return NVRTC_ERROR_INVALID_OPTION;
	}
	std::string arch = arch_option(*m, opts, &p->log);
	if (arch.empty()) return NVRTC_ERROR_INVALID_OPTION;
	p->log = error_lines(*p);
	if (p->log.empty()) {
		// The check runs without the lock (it takes a while); the caller
		// owns the program meanwhile, as NVRTC requires.
		std::string name = p->name, src = p->src, log;
		auto headers = p->headers;
		lock.unlock();
		bool ok = syntax_check(name, src, headers, opts, &log);
		lock.lock();
		if (!(p = get(prog))) return NVRTC_ERROR_INVALID_PROGRAM;
		p->log = ok ? "" : log;
	}
	p->compiled = p->log.empty();
	Target t;
	parse_target(arch, &t);
	p->target = arch;
	p->virt = t.virt;
	return p->compiled ? NVRTC_SUCCESS : NVRTC_ERROR_COMPILATION;
}

EMU_API int nvrtcGetProgramLogSize(void* prog, size_t* size) {
	LOCK;
	Program* p = get(prog);
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	if (!size) return NVRTC_ERROR_INVALID_INPUT;
	*size = p->log.size() + 1;
	return NVRTC_SUCCESS;
}

EMU_API int nvrtcGetProgramLog(void* prog, char* log) {
	LOCK;
	Program* p = get(prog);
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	if (!log) return NVRTC_ERROR_INVALID_INPUT;
	memcpy(log, p->log.c_str(), p->log.size() + 1);
	return NVRTC_SUCCESS;
}

namespace {
// image_text is a compiled program's image: the tag line naming target,
// then the source. PTX names the virtual architecture (sm_90a's is
// compute_90a).
std::string image_text(const Program& p, bool ptx) {
	std::string target = p.target;
	if (ptx && target.compare(0, 3, "sm_") == 0) target = "compute_" + target.substr(3);
	return kImageTag + target + "\n" + p.src;
}

// image_size and image serve PTX (NUL-terminated) and CUBIN. A CUBIN of a
// virtual architecture is empty: size 0, as NVRTC's documentation says.
int image_size(void* prog, size_t* size, bool ptx) {
	Program* p = get(prog);
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	if (!size) return NVRTC_ERROR_INVALID_INPUT;
	if (!p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	*size = !ptx && p->virt ? 0 : image_text(*p, ptx).size() + (ptx ? 1 : 0);
	return NVRTC_SUCCESS;
}
int image(void* prog, char* out, bool ptx) {
	Program* p = get(prog);
	if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
	if (!out) return NVRTC_ERROR_INVALID_INPUT;
	if (!p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	if (!ptx && p->virt) return NVRTC_SUCCESS;
	std::string img = image_text(*p, ptx);
	memcpy(out, img.c_str(), img.size() + (ptx ? 1 : 0));
	return NVRTC_SUCCESS;
}
}  // namespace

EMU_API int nvrtcGetPTXSize(void* prog, size_t* size) {
	LOCK;
	return image_size(prog, size, true);
}
EMU_API int nvrtcGetPTX(void* prog, char* ptx) {
	LOCK;
	return image(prog, ptx, true);
}
EMU_API int nvrtcGetCUBINSize(void* prog, size_t* size) {
	LOCK;
	return image_size(prog, size, false);
}
EMU_API int nvrtcGetCUBIN(void* prog, char* cubin) {
	LOCK;
	return image(prog, cubin, false);
}
