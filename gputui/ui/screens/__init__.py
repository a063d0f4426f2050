"""gputui.ui.screens"""
