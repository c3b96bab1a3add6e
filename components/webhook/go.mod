module github.com/xila-guard/xila-guard/components/webhook

go 1.26
