module github.com/xila-guard/xila-guard/components/scheduler

go 1.26
