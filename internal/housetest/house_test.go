package housetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The rules of the house (issue 18's acceptance), checked on every
// non-test Go file of the module, whatever its build constraints (the
// browser's js files included):
//
//  1. engine names concrete backends in one file only, its registration
//     file (engine/backends.go: the imports that link and register them,
//     and their per-architecture session-size estimates); an import of a
//     backend, or of a package that depends on one, anywhere else in
//     engine is an offender.
//  2. A backend never imports another backend, directly or through other
//     packages. The backends are cpu, webgpu and cuda (with their
//     subpackages) and any package that calls backend.Register.
//  3. Only commands (package main, e.g. cmd/*) read the environment: a
//     library package that refers to os.Getenv, os.LookupEnv, os.Environ,
//     os.ExpandEnv or syscall.Getenv is an offender. Test files are
//     exempt, and so are the test-support packages below, which exist only
//     for tests (the test checks that no library package imports them).
//
// Offenders that helpers of issue 18 are removing on their branches are
// listed in pending with the helper's name, so that the test passes on
// main meanwhile; an entry that no longer matches anything fails the test,
// so the list only shrinks: whoever merges the branch that fixes it
// deletes the line.

// testSupport are packages (and their subpackages) that only tests import:
// fixtures reads CORTIQ_SHARED (where the shared test data lives), e2e's
// browser harness reads CHROMIUM and CORTIQ_REQUIRE_BROWSER and runs go
// build with the environment.
var testSupport = []string{"fixtures", "e2e"}

// namedBackends are the backends known by name; packages that call
// backend.Register are added.
var namedBackends = []string{"cpu", "webgpu", "cuda"}

// pending are today's known offenders, each with the helper (branch) that
// removes it. Keys are "rule: file" (rules: getenv, engine-imports-backend,
// backend-imports-backend).
var pending = map[string]string{}

// pkg is what go list says of one package of the module, plus its parsed
// files.
type pkg struct {
	ImportPath     string
	Dir            string
	Name           string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	Deps           []string

	rel   string  // import path relative to the module ("" for the root)
	files []*file // non-test files, all build constraints
}

type file struct {
	rel     string // path relative to the module root
	ast     *ast.File
	imports []imp
}

type imp struct {
	path  string // relative to the module, or the full path outside it
	name  string // the name it is known by in the file
	blank bool
	line  int
}

// offender is one breach of a rule.
type offender struct {
	rule, where, detail string
}

func (o offender) key() string { return o.rule + ": " + o.where }

func TestHouse(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("the go command is not on PATH: %v", err)
	}
	root, module := moduleRoot(t)
	pkgs := listPackages(t, root, module)
	fset := token.NewFileSet()
	for _, p := range pkgs {
		parseFiles(t, fset, root, module, p)
	}
	var offs []offender
	offs = append(offs, checkGetenv(fset, pkgs)...)
	backends := findBackends(pkgs)
	t.Logf("backends: %s", strings.Join(backends, ", "))
	offs = append(offs, checkEngine(fset, pkgs, backends)...)
	offs = append(offs, checkBackends(pkgs, backends)...)
	offs = append(offs, checkTestSupport(pkgs)...)

	matched := map[string]bool{}
	var fail []string
	for _, o := range offs {
		if who, ok := pending[o.key()]; ok {
			matched[o.key()] = true
			t.Logf("pending (%s removes it): %s: %s", who, o.key(), o.detail)
			continue
		}
		fail = append(fail, fmt.Sprintf("%s: %s", o.key(), o.detail))
	}
	sort.Strings(fail)
	for _, f := range fail {
		t.Error(f)
	}
	var stale []string
	for k, who := range pending {
		if !matched[k] {
			stale = append(stale, fmt.Sprintf("pending entry %q (%s) matches nothing now: delete it from pending in house_test.go", k, who))
		}
	}
	sort.Strings(stale)
	for _, s := range stale {
		t.Error(s)
	}
}

// moduleRoot is the directory of go.mod and the module path.
func moduleRoot(t *testing.T) (string, string) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("go list -m: %q", out)
	}
	return f[0], f[1]
}

// listPackages runs go list -e -deps -json ./... in root and keeps the
// module's packages.
func listPackages(t *testing.T, root, module string) []*pkg {
	cmd := exec.Command("go", "list", "-e", "-deps", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json ./...: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []*pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		p := new(pkg)
		if err := dec.Decode(p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.ImportPath != module && !strings.HasPrefix(p.ImportPath, module+"/") {
			continue
		}
		p.rel = strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		for i, d := range p.Deps {
			p.Deps[i] = relPath(module, d)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages of the module")
	}
	return pkgs
}

func relPath(module, path string) string {
	if path == module {
		return ""
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

// parseFiles parses every non-test file of p, those excluded by build
// constraints included.
func parseFiles(t *testing.T, fset *token.FileSet, root, module string, p *pkg) {
	names := slices.Concat(p.GoFiles, p.CgoFiles, p.IgnoredGoFiles)
	sort.Strings(names)
	for _, n := range slices.Compact(names) {
		if strings.HasSuffix(n, "_test.go") || !strings.HasSuffix(n, ".go") {
			continue
		}
		path := filepath.Join(p.Dir, n)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			t.Fatal(err)
		}
		fl := &file{rel: filepath.ToSlash(rel), ast: f}
		for _, is := range f.Imports {
			ip, _ := strconv.Unquote(is.Path.Value)
			name := ip[strings.LastIndex(ip, "/")+1:]
			if is.Name != nil {
				name = is.Name.Name
			}
			fl.imports = append(fl.imports, imp{
				path:  relPath(module, ip),
				name:  name,
				blank: name == "_",
				line:  fset.Position(is.Pos()).Line,
			})
		}
		p.files = append(p.files, fl)
	}
}

// under reports whether the module-relative path is area or inside it.
func under(path, area string) bool {
	return path == area || strings.HasPrefix(path, area+"/")
}

func underAny(path string, areas []string) (string, bool) {
	for _, a := range areas {
		if under(path, a) {
			return a, true
		}
	}
	return "", false
}

// isLibrary reports whether p must not read the environment.
func isLibrary(p *pkg) bool {
	if p.Name == "main" {
		return false
	}
	if p.Name == "" { // no Go files for this build: decide by the files
		for _, f := range p.files {
			if f.ast.Name.Name == "main" {
				return false
			}
		}
	}
	_, support := underAny(p.rel, testSupport)
	return !support && !under(p.rel, "internal/housetest")
}

// envFuncs are the functions that read the environment, by package.
var envFuncs = map[string][]string{
	"os":      {"Getenv", "LookupEnv", "Environ", "ExpandEnv"},
	"syscall": {"Getenv", "Environ"},
}

func checkGetenv(fset *token.FileSet, pkgs []*pkg) []offender {
	var offs []offender
	for _, p := range pkgs {
		if !isLibrary(p) {
			continue
		}
		for _, f := range p.files {
			local := map[string]string{} // local name -> package (os, syscall)
			for _, is := range f.ast.Imports {
				ip, _ := strconv.Unquote(is.Path.Value)
				if _, ok := envFuncs[ip]; !ok {
					continue
				}
				name := ip
				if is.Name != nil {
					name = is.Name.Name
				}
				local[name] = ip
			}
			if len(local) == 0 {
				continue
			}
			var uses []string
			ast.Inspect(f.ast, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				id, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				if ip, ok := local[id.Name]; ok && slices.Contains(envFuncs[ip], sel.Sel.Name) {
					uses = append(uses, fmt.Sprintf("%s.%s at line %d", ip, sel.Sel.Name, fset.Position(sel.Pos()).Line))
				}
				return true
			})
			if len(uses) > 0 {
				offs = append(offs, offender{"getenv", f.rel, fmt.Sprintf("library package %s reads the environment (%s); read it in cmd/* and pass an option", p.ImportPath, strings.Join(uses, ", "))})
			}
		}
	}
	return offs
}

// findBackends returns the backend areas: the named ones and every package
// whose non-test code calls backend.Register.
func findBackends(pkgs []*pkg) []string {
	set := map[string]bool{}
	for _, b := range namedBackends {
		set[b] = true
	}
	for _, p := range pkgs {
		for _, f := range p.files {
			name := ""
			for _, im := range f.imports {
				if im.path == "backend" {
					name = im.name
				}
			}
			if name == "" {
				continue
			}
			ast.Inspect(f.ast, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Register" {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
							set[p.rel] = true
						}
					}
				}
				return true
			})
		}
	}
	var out []string
	for b := range set {
		out = append(out, b)
	}
	sort.Strings(out)
	return out
}

func byPath(pkgs []*pkg) map[string]*pkg {
	m := map[string]*pkg{}
	for _, p := range pkgs {
		m[p.rel] = p
	}
	return m
}

// backendDeps lists the backends p depends on (itself excluded).
func backendDeps(p *pkg, own string, backends []string) []string {
	var out []string
	for _, d := range p.Deps {
		if b, ok := underAny(d, backends); ok && b != own && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// registrationFile is the one file of package engine that names concrete
// backends.
const registrationFile = "engine/backends.go"

func checkEngine(fset *token.FileSet, pkgs []*pkg, backends []string) []offender {
	all := byPath(pkgs)
	var offs []offender
	for _, p := range pkgs {
		if !under(p.rel, "engine") {
			continue
		}
		for _, f := range p.files {
			var bad []string
			for _, im := range f.imports {
				if b, ok := underAny(im.path, backends); ok {
					if f.rel != registrationFile {
						bad = append(bad, fmt.Sprintf("imports backend %s at line %d (only the registration file %s may name one)", b, im.line, registrationFile))
					}
					continue
				}
				if dep, ok := all[im.path]; ok {
					if bs := backendDeps(dep, "", backends); len(bs) > 0 {
						bad = append(bad, fmt.Sprintf("imports %s at line %d, which depends on backend %s", im.path, im.line, strings.Join(bs, ", ")))
					}
				}
			}
			if len(bad) > 0 {
				offs = append(offs, offender{"engine-imports-backend", f.rel, strings.Join(bad, "; ")})
			}
		}
	}
	return offs
}

func checkBackends(pkgs []*pkg, backends []string) []offender {
	all := byPath(pkgs)
	var offs []offender
	for _, b := range backends {
		var details []string
		for _, p := range pkgs {
			if !under(p.rel, b) {
				continue
			}
			// Direct imports, every build constraint.
			for _, f := range p.files {
				for _, im := range f.imports {
					if o, ok := underAny(im.path, backends); ok && o != b {
						details = append(details, fmt.Sprintf("%s:%d imports backend %s", f.rel, im.line, o))
					}
				}
			}
			// Through other packages (this build's graph).
			for _, f := range p.files {
				for _, im := range f.imports {
					dep, ok := all[im.path]
					if !ok || under(im.path, b) {
						continue
					}
					if _, ok := underAny(im.path, backends); ok {
						continue // reported above
					}
					if bs := backendDeps(dep, b, backends); len(bs) > 0 {
						details = append(details, fmt.Sprintf("%s:%d imports %s, which depends on backend %s", f.rel, im.line, im.path, strings.Join(bs, ", ")))
					}
				}
			}
		}
		if len(details) > 0 {
			slices.Sort(details)
			offs = append(offs, offender{"backend-imports-backend", b, strings.Join(slices.Compact(details), "; ")})
		}
	}
	return offs
}

// checkTestSupport keeps the environment exemption of the test-support
// packages honest: no library package may import them.
func checkTestSupport(pkgs []*pkg) []offender {
	var offs []offender
	for _, p := range pkgs {
		if _, support := underAny(p.rel, testSupport); support || !isLibrary(p) {
			continue
		}
		for _, f := range p.files {
			for _, im := range f.imports {
				if s, ok := underAny(im.path, testSupport); ok {
					offs = append(offs, offender{"imports-test-support", f.rel, fmt.Sprintf("line %d imports %s, which is for tests only (it may read the environment)", im.line, s)})
				}
			}
		}
	}
	return offs
}
