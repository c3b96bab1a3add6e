package charts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// guaranteeTable is the heading of docs/security.md whose table gives
// every guarded input of a decision a stable ID.
const guaranteeTable = "## Inputs of a decision and who stops the others"

var (
	// guaranteeID is the form of an ID: G- and words of capitals and
	// digits joined by hyphens.
	guaranteeID = regexp.MustCompile(`^G-[A-Z0-9]+(?:-[A-Z0-9]+)*$`)
	// leadingID matches an ID at the start of a string literal, followed
	// by a space or the end of the literal.
	leadingID = regexp.MustCompile(`^(G-[A-Z0-9]+(?:-[A-Z0-9]+)*)(?: |$)`)
	// testName is the name of a test function in the "proven by" column.
	testName = regexp.MustCompile(`\bTest[A-Z0-9_][A-Za-z0-9_]*`)
)

// guarantee is one row of the table.
type guarantee struct {
	id    string
	input string // the row's "input" cell, to name the row in messages
	proof string // the row's "proven by" cell
}

// gap says whether the row is a known gap: its "proven by" cell starts
// with "gap:", which states that nothing stops the attack the row
// describes. Only such a row may have no test carrying its ID.
func (g guarantee) gap() bool { return strings.HasPrefix(g.proof, "gap:") }

// TestGuaranteeIDsHaveTests keeps the IDs of the table "Inputs of a
// decision and who stops the others" of docs/security.md and the tests
// that prove each row in step.
//
// A test carries an ID when a string literal of its file starts with the
// ID followed by a space or the end of the literal: a subtest's name, a
// table case's name, or the prefix such names are built from
// ("G-POD-ADDRESS "+tc.name). A literal may start with several IDs, each
// followed by a space, when one case proves several rows. Every *_test.go
// file of the repository is read, build tags or not, parsed but not
// compiled.
//
// The test fails when a row has no ID, a malformed one or one another row
// has too; when no test carries a row's ID, unless the row is a known gap
// (its "proven by" cell starts with "gap:"); when a test the "proven by"
// cell names (TestXxx) is declared by no test file, or by none that
// carries the row's ID; and when a test carries an ID that no row
// declares.
func TestGuaranteeIDsHaveTests(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	rows := readGuarantees(t, filepath.Join(root, "docs", "security.md"))
	declared := map[string]guarantee{}
	var valid []guarantee
	for _, g := range rows {
		switch {
		case !guaranteeID.MatchString(g.id):
			t.Errorf("docs/security.md: the row %q has the ID %q, want G- and words of capitals joined by hyphens (G-POOL-LABEL)", g.input, g.id)
		case declared[g.id].id != "":
			t.Errorf("docs/security.md: %s is the ID of the rows %q and %q: an ID names one row", g.id, declared[g.id].input, g.input)
		default:
			declared[g.id] = g
			valid = append(valid, g)
		}
	}

	files := scanTestFiles(t, root)
	carriers := map[string][]string{} // ID -> the files that carry it
	for _, f := range files {
		for _, c := range f.carried {
			if _, ok := declared[c.id]; !ok {
				t.Errorf("%s: %q carries %s, which no row of docs/security.md declares", c.pos, c.literal, c.id)
			}
			if !slices.Contains(carriers[c.id], f.path) {
				carriers[c.id] = append(carriers[c.id], f.path)
			}
		}
	}
	declaring := map[string][]testFile{} // test function -> its files
	for _, f := range files {
		for _, name := range f.tests {
			declaring[name] = append(declaring[name], f)
		}
	}

	for _, g := range valid {
		if len(carriers[g.id]) == 0 && !g.gap() {
			t.Errorf("docs/security.md: no test carries %s (%s): start the name of a subtest or table case that proves it with %q, or, if nothing stops the attack, start the row's \"proven by\" cell with \"gap:\"", g.id, g.input, g.id+" ")
		}
		for _, name := range uniq(testName.FindAllString(g.proof, -1)) {
			decls := declaring[name]
			if len(decls) == 0 {
				t.Errorf("docs/security.md: the row %s names %s, which no *_test.go file declares", g.id, name)
				continue
			}
			// A test may run steps written in other files of its package
			// (e2e's TestPlatform does), so the ID is looked for in the
			// package of each file that declares the test.
			if !slices.ContainsFunc(decls, func(d testFile) bool {
				return slices.ContainsFunc(files, func(f testFile) bool { return f.dir() == d.dir() && f.carries(g.id) })
			}) {
				var paths []string
				for _, f := range decls {
					paths = append(paths, f.path)
				}
				t.Errorf("docs/security.md: the row %s names %s, but no test file of its package (%s) carries %s: start the name of its subtest or table case that proves the row with %q",
					g.id, name, strings.Join(paths, ", "), g.id, g.id+" ")
			}
		}
	}
}

// readGuarantees returns the rows of the table under guaranteeTable,
// whose columns it finds by the header's names "ID", "input" and "proven
// by".
func readGuarantees(t *testing.T, path string) []guarantee {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := slices.Index(lines, guaranteeTable)
	if start < 0 {
		t.Fatalf("%s has no heading %q", path, guaranteeTable)
	}
	var table [][]string
	for _, l := range lines[start+1:] {
		if strings.HasPrefix(l, "## ") {
			break
		}
		if strings.HasPrefix(l, "|") {
			table = append(table, cells(l))
		} else if len(table) > 0 {
			break
		}
	}
	if len(table) < 3 {
		t.Fatalf("%s: no table with rows under %q", path, guaranteeTable)
	}
	header := table[0]
	id, input, proof := slices.Index(header, "ID"), slices.Index(header, "input"), slices.Index(header, "proven by")
	if id < 0 || input < 0 || proof < 0 {
		t.Fatalf("%s: the table under %q has the columns %q, want ID, input and proven by among them", path, guaranteeTable, header)
	}
	var rows []guarantee
	for _, r := range table[2:] {
		if len(r) != len(header) {
			t.Errorf("%s: the row %q has %d cells, want %d", path, r, len(r), len(header))
			continue
		}
		rows = append(rows, guarantee{id: strings.Trim(r[id], "`"), input: r[input], proof: r[proof]})
	}
	return rows
}

// cells splits a Markdown table row into its trimmed cells.
func cells(row string) []string {
	parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(row), "|"), "|"), "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// testFile is what one *_test.go file declares and carries.
type testFile struct {
	path    string   // relative to the repository's root
	tests   []string // its top-level functions named Test...
	carried []carriedID
}

// carriedID is an ID at the start of a string literal.
type carriedID struct {
	id, literal, pos string
}

// dir is the directory of the file: its package.
func (f testFile) dir() string { return path.Dir(f.path) }

func (f testFile) carries(id string) bool {
	return slices.ContainsFunc(f.carried, func(c carriedID) bool { return c.id == id })
}

// scanTestFiles parses every *_test.go file under root, skipping the
// directories the go command ignores (names starting with "." or "_",
// testdata) and vendor.
func scanTestFiles(t *testing.T, root string) []testFile {
	t.Helper()
	var files []testFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f := testFile{path: filepath.ToSlash(rel)}
		ast.Inspect(src, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv == nil && strings.HasPrefix(n.Name.Name, "Test") {
					f.tests = append(f.tests, n.Name.Name)
				}
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(n.Value)
				if err != nil {
					return true
				}
				pos := fset.Position(n.Pos())
				for rest := s; ; {
					m := leadingID.FindStringSubmatch(rest)
					if m == nil {
						break
					}
					f.carried = append(f.carried, carriedID{id: m[1], literal: s, pos: f.path + ":" + strconv.Itoa(pos.Line)})
					rest = rest[len(m[0]):]
				}
			}
			return true
		})
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no *_test.go file under %s", root)
	}
	return files
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
