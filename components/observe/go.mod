module github.com/xila-guard/xila-guard/components/observe

go 1.26
