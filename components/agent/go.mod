module github.com/xila-guard/xila-guard/components/agent

go 1.26
